"""FASTA → digest → modified peptides → decoys → fragment index → on-disk store."""
