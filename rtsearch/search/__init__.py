"""Searching (core): the `SearchTarget` protocol (`target`) and its kinds (`database`, `library`), a run's
PSM table (`table`) and running q-values (`live`), target-decoy FDR (`fdr`), the run's discriminant (`lda`),
and offline search over files (`offline`). The daemon and offline search drive any kind the same way."""
