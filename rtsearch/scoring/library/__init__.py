"""Spectral library scoring: SpectraST's dot, dot bias, delta dot and F-value of the best entry (`engine`)."""
