"""rasp-lab: rasp_cli."""
