"""Scale-out (shell): one front door (the daemon), many scoring workers, placed and restarted by Ray or locally.

- `partition.py`: Li et al.'s equal-work cut of the precursor-mass range (pure NumPy).
- `cost.py`: what a spectrum costs its partition worker, fitted from the parts answered (the cuts' work).
- `pieces.py`: partition's plan — a spectrum whole to the worker of its mass, or its queries split over their
  owners when it reaches beyond that worker's slice — and the batch's answer put back together.
- `worker.py`: a worker process's loop — the target opened again, batches in and answers out over ZeroMQ,
  heartbeats; the wire is drawn there.
- `frames.py`: that wire's messages as explicit frames (a JSON header, raw little-endian arrays), read with every
  length checked: nothing a peer sends is unpickled.
- `auth.py`: who may speak to a door — CURVE off loopback (keys made at each start, carried in the workers' specs),
  a token in every worker's identity.
- `placement.py`: `RayPlacement` (actors, restarted by Ray) and `LocalPlacement` (processes of this host).
- `door.py`: `ClusterScorer`, the daemon's engine threads' scorer: routing (replicate / partition), dead
  workers noticed and their batches sent again.
- `status.py`: `Cluster`, what the door records of a worker (the daemon's metrics export it).
- `share.py`: lanes sharing one cluster's workers (each lane's door's endpoints; lane 0's starts the workers).
- `serve.py`: `open_cluster`, the cluster from ``[serve] cluster*`` settings; `plan`: mode, sharing, a worker's room.
"""
