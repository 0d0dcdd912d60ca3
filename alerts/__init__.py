"""The Prometheus alerting rules: `python -m alerts.generate` writes them (see generate.py)."""
