"""topology-hints-exporter: is Kubernetes topology-aware routing working, and if not, why."""

__version__ = "0.1.0"
