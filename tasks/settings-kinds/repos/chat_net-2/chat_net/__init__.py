"""The chat_net service."""
