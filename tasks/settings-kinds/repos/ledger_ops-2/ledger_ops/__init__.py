"""The ledger_ops service."""
