"""The billing_hub service."""
