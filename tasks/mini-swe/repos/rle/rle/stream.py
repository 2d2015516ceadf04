class Decoder:
    """Incremental decoder: feed chunks, collect output."""

    def __init__(self):
        self.pending = ""
        self.parts = []

    def feed(self, chunk):
        for c in chunk:
            if c.isdigit():
                self.pending = c
            else:
                self.parts.append(c * int(self.pending or 1))
                self.pending = ""

    def finish(self):
        if self.pending:
            raise ValueError("dangling count at end of input")
        return "".join(self.parts)
