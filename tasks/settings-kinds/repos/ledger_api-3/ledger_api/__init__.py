"""The ledger_api service."""
