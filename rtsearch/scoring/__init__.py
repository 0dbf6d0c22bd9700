"""Scoring (core): a batch of spectra against one kind of target, on NumPy or CuPy (`backend`).

One subpackage per kind (`database`, `library`), one module per step; each step has a
NumPy reference and, where it pays, a CuPy kernel beside it computing the same function
(the GPU parity tests compare both). Its output is a `rtsearch.matches.ScoredBatch`.
"""
