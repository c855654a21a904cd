"""The experiment's room: jobs that plan runs, train them through the grid runner and read them
back into typed records (issue 48's home). ``curve``: training-length curves (``rasp curve``);
``validate``: predictions checked against our own training (``rasp validate-predictor``);
``replication``: a paper's experiment as its authors ran it (``rasp replicate huang``)."""
