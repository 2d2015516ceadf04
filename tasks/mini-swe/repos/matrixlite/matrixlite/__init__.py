from matrixlite.matrix import Matrix
from matrixlite.ops import gram, identity

__all__ = ["Matrix", "gram", "identity"]
