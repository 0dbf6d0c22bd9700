"""Intake: the spectra socket, its door and the intake processes that decode it into columnar chunks."""
