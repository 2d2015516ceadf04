"""The ledger_pad service."""
