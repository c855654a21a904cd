"""rasp-lab: compiler."""
