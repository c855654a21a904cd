"""rasp-lab: analysis."""
