"""Analyses of a RASP program (the IR): its measures (length, layers, heads), the RASP-L
check and prefix causality (Zhou et al. 2023), the C-RASP check (Huang et al. 2025) and
value-set inference. They read the IR and stand on the language core only.

Modules: ``measures``, ``raspl``, ``crasp``, ``value_sets``.
"""
