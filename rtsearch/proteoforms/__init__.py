"""Top-down targets: proteins as prefix-mass arrays with their N-terminal forms and known PTMs (`database`), stored
and loaded memory-mapped like the other targets (`store`)."""
