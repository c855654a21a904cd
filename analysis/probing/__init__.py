"""rasp-lab analysis — Probing: attention metrics (JSD, Kazemnejad distance, head matching, T5-bucket fits) and compiled-vs-trained alignment."""
