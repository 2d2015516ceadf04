"""Monitoring: Prometheus metrics of every service, each built on a registry passed in."""
