"""The gate_box service."""
