"""The file_hub service."""
