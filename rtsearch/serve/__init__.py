"""The daemon (shell), one package a concern; `daemon.Daemon` is the composition root, `lanes` a topology of daemons.

- `intake/`: the spectra socket, its door (a C proxy) and the intake processes that decode it into columnar chunks;
- `engine/`: the scheduler (micro-batching by mass and deadline, admission at the door, expiry, a cluster's pacing)
  and the engine threads that take a batch, score it and answer it (`engine.workers.WorkerPool`);
- `executors/`: where a batch is scored besides the daemon's own thread — an engine process; a cluster's door is
  `rtsearch.cluster`;
- `runs/`: the run book, each run's journal (every answer written before any output sees it), its end (final FDR,
  results file) in the refit process, the results folder's lock;
- `outputs/`: the results socket and the `Output` seam (MQTT, elution events) with its registry (`outputs.kinds`);
- `children/`: child processes and their channels (start, handshake, framing, shared-memory pipes, ending with the
  parent), ZeroMQ proxies;
- `observe/`: stats dataclasses, their Prometheus metrics, the HTTP health port, systemd's readiness.
"""
