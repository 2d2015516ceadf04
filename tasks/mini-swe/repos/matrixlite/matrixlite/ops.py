from matrixlite.matrix import Matrix


def identity(n):
    return Matrix([[1 if i == j else 0 for j in range(n)] for i in range(n)])


def gram(m):
    """The Gram matrix A^T A."""
    return m.transpose() @ m
