"""rasp-lab analysis — Training: run configuration, batches, the training loop, run directories, evaluation, the Ray grid runner and sweeps."""
