from matrixlite.shape import check_rectangular


class Matrix:
    def __init__(self, rows):
        self.rows = [list(r) for r in rows]
        self.n_rows, self.n_cols = check_rectangular(self.rows)

    @property
    def shape(self):
        return (self.n_rows, self.n_cols)

    def __eq__(self, other):
        return isinstance(other, Matrix) and self.rows == other.rows

    def __repr__(self):
        return f"Matrix({self.rows})"

    def transpose(self):
        n = self.n_rows
        return Matrix([[self.rows[i][j] for i in range(n)] for j in range(n)])

    def __matmul__(self, other):
        if self.n_cols != other.n_rows:
            raise ValueError(f"shape mismatch {self.shape} @ {other.shape}")
        cols = other.transpose().rows
        return Matrix([[sum(a * b for a, b in zip(r, c)) for c in cols] for r in self.rows])

    def __add__(self, other):
        if self.shape != other.shape:
            raise ValueError("shape mismatch")
        return Matrix([[a + b for a, b in zip(r, s)] for r, s in zip(self.rows, other.rows)])
