"""The ticket_gate service."""
