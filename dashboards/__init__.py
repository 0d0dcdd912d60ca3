"""The Grafana dashboards: `python -m dashboards.generate` writes them (see generate.py)."""
