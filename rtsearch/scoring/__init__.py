"""Scoring: candidates from the fragment index, full scores, features, discriminant.

One module per step; each has a NumPy reference, and the steps that pay for it
a CuPy kernel in `rtsearch.scoring.database.kernels` computing the same function.
"""
