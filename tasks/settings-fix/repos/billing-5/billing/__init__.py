"""The billing service."""
