"""What the daemon reports: stats dataclasses, Prometheus metrics, the HTTP health port, systemd's readiness."""
