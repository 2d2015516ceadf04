from bankxfer.account import Account
from bankxfer.journal import Journal


class Bank:
    def __init__(self):
        self.accounts = {}
        self.journal = Journal()

    def open(self, owner, balance=0):
        self.accounts[owner] = Account(owner, balance)
        return self.accounts[owner]

    def transfer(self, src, dst, amount):
        if amount <= 0:
            raise ValueError("amount must be positive")
        a, b = self.accounts[src], self.accounts[dst]
        a.withdraw(amount)
        b.deposit(amount)
        self.journal.record(src, dst, amount)

    def total(self):
        return sum(acc.balance for acc in self.accounts.values())
