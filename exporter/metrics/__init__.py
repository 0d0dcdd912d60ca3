"""Metric families, the collector that renders them, and the exporter's own instruments."""
