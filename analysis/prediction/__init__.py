"""rasp-lab analysis — Prediction: which tasks length-generalize (predictor, program search, verification, the predictor checked against our runs, docs/predictions.md)."""
