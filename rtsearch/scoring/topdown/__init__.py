"""Top-down scoring (CUDA-TP; TopPIC): a deconvoluted spectrum as PRM masses (`prm`), aligned against a
proteoform's prefix masses with unknown mass shifts (`align`, the NumPy reference)."""
