from depgraph.errors import CycleError
from depgraph.graph import Graph
from depgraph.loader import load_edges

__all__ = ["CycleError", "Graph", "load_edges"]
