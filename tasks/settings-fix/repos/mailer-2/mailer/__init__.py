"""The mailer service."""
