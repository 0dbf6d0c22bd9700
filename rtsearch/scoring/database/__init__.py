"""Database search scoring: fragment-index candidates, full scores and features of the best peptide (`engine`)."""
