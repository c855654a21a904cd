"""The experiment's room (issue 48): the only code of ``analysis/`` besides training that starts
training. ``plan``: an experiment's runs with their settings resolved once and each task carried
as its source record; ``pipeline``: train -> load -> probe -> predict -> claims, one function a
stage, typed records (the report's runs: :mod:`analysis.reporting.report` renders them). Jobs on
them: ``curve``: training-length curves (``rasp curve``); ``validate``: predictions checked
against our own training (``rasp validate-predictor``); ``replication``: a paper's experiment as
its authors ran it (``rasp replicate huang``)."""
