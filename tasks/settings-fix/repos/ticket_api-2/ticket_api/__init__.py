"""The ticket_api service."""
