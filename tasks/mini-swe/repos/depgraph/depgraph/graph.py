from depgraph.errors import CycleError


class Graph:
    def __init__(self, edges=()):
        self.adj = {}
        for a, b in edges:
            self.add_edge(a, b)

    def add_node(self, n):
        self.adj.setdefault(n, [])

    def add_edge(self, a, b):
        self.add_node(a)
        self.add_node(b)
        if b not in self.adj[a]:
            self.adj[a].append(b)

    def _visit(self, node, visited, order):
        if node in visited:
            raise CycleError(node)
        visited.add(node)
        for nxt in self.adj[node]:
            self._visit(nxt, visited, order)
        order.append(node)

    def topological_order(self):
        """Dependencies first: each node comes after everything it points to."""
        visited, order = set(), []
        for node in self.adj:
            if node not in visited:
                self._visit(node, visited, order)
        return order

    def has_cycle(self):
        try:
            self.topological_order()
        except CycleError:
            return True
        return False
