"""rasp-lab analysis — Evidence: every statement about the papers computed from runs, with its
seed spread and interval, labelled supported / contradicted / inconclusive (claims)."""
