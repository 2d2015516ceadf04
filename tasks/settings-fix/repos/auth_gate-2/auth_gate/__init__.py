"""The auth_gate service."""
