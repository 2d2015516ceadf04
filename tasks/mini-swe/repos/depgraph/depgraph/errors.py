class CycleError(ValueError):
    def __init__(self, node):
        super().__init__(f"cycle through {node!r}")
        self.node = node
