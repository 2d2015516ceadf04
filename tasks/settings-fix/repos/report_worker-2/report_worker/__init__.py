"""The report_worker service."""
