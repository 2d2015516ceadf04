"""The mail_index service."""
