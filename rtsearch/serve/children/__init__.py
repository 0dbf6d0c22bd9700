"""Child processes and the channels to them: start, handshake, framing, shared-memory pipes, proxies, ending with the
parent."""
