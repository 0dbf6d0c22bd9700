"""Spectral libraries (core): MSP and sptxt files (`files`), the preprocessed store with its decoys (`store`),
and consensus libraries built from a search's own identifications (`consensus`)."""
