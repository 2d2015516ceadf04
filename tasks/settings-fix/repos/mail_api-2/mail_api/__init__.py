"""The mail_api service."""
