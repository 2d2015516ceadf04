"""The ledger_hub service."""
