"""The upload_web service."""
