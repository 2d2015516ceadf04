import pytest

from matrixlite import Matrix, identity


def test_square_transpose():
    assert Matrix([[1, 2], [3, 4]]).transpose() == Matrix([[1, 3], [2, 4]])


def test_identity_matmul():
    m = Matrix([[1, 2], [3, 4]])
    assert m @ identity(2) == m


def test_add():
    assert Matrix([[1]]) + Matrix([[2]]) == Matrix([[3]])


def test_ragged():
    with pytest.raises(ValueError):
        Matrix([[1, 2], [3]])


def test_shape_mismatch():
    with pytest.raises(ValueError):
        Matrix([[1, 2]]) @ Matrix([[1, 2]])
