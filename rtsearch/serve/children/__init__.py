"""Child processes and the channels to them: one `child.Child` for every kind (start, handshake, supervision, end with
the parent), its framing, shared-memory request/reply (`pipes`), calls (`calls`), C proxies and process settings."""
