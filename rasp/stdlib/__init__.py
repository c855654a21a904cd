"""The standard library of the RASP dialect: .rasp files (rasplib, rasp_l, examples)."""
