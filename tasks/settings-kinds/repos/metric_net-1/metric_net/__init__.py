"""The metric_net service."""
