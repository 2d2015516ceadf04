from bankxfer.account import Account, AccountFrozen, InsufficientFunds
from bankxfer.bank import Bank

__all__ = ["Account", "AccountFrozen", "Bank", "InsufficientFunds"]
