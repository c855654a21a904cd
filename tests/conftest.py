"""Shared test configuration.

Hypothesis runs derandomized (the same examples on every run, so CI is reproducible) and without
an example database; set ``HYPOTHESIS_PROFILE=explore`` to draw fresh random examples locally.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
