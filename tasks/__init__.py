"""rasp-lab: tasks."""
