from ledger.money import Money


class Ledger:
    def __init__(self, currency="EUR"):
        self.currency = currency
        self.entries = []

    def post(self, description, amount):
        money = amount if isinstance(amount, Money) else Money(amount, self.currency)
        if money.currency != self.currency:
            raise ValueError("currency mismatch")
        self.entries.append((description, money))

    def balance(self):
        total = Money(0, self.currency)
        for _, m in self.entries:
            total = total + m
        return total
