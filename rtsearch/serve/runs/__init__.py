"""Runs: the run book, each run's journal, its end (final FDR, results file), the refit process, the folder's lock."""
