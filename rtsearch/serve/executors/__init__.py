"""Where a batch is scored besides the daemon's own thread: an engine process (the cluster's executor:
`rtsearch.cluster`)."""
