class Journal:
    def __init__(self):
        self.entries = []

    def record(self, src, dst, amount):
        self.entries.append((src, dst, amount))

    def __len__(self):
        return len(self.entries)
