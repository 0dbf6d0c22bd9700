"""The daemon (shell): intake, micro-batching, engine workers, publishing, run book and metrics (`daemon`)."""
