"""The gate_ops service."""
