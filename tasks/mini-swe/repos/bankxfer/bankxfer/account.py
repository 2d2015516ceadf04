class InsufficientFunds(Exception):
    pass


class AccountFrozen(Exception):
    pass


class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance
        self.frozen = False

    def withdraw(self, amount):
        if self.frozen:
            raise AccountFrozen(self.owner)
        if amount > self.balance:
            raise InsufficientFunds(f"{self.owner}: {self.balance} < {amount}")
        self.balance -= amount

    def deposit(self, amount):
        if self.frozen:
            raise AccountFrozen(self.owner)
        self.balance += amount
