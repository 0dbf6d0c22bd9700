"""The engine loop: the scheduler (micro-batching, admission, expiry, pacing) and the engine threads that take, score
and answer."""
