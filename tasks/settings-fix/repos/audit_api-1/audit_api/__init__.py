"""The audit_api service."""
