"""rasp-lab analysis — Reporting: claims computed from runs, figures, the HTML report, docs/results.md."""
