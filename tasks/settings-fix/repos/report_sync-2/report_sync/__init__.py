"""The report_sync service."""
