"""The suite's file order (``tests/fixtures/ordering.py``): longest first, files whole."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.fixtures.ordering import SECONDS, TESTS, pytest_collection_modifyitems


def test_every_measured_file_exists() -> None:
    """A renamed or removed file would silently lose its place at the front."""
    missing = [name for name in SECONDS if not (TESTS / name).is_file()]
    assert not missing, missing


def _item(path: Path, name: str, slow: bool = False) -> pytest.Item:
    marker = pytest.mark.slow.mark if slow else None
    item = SimpleNamespace(path=path, name=name, get_closest_marker=lambda _name: marker)
    return cast(pytest.Item, item)


def test_the_longest_files_go_first_then_slow_ones_and_each_file_stays_whole() -> None:
    long, longer = sorted(SECONDS, key=SECONDS.__getitem__)[-2:]
    items = [
        _item(TESTS / "a/test_x.py", "1"), _item(TESTS / "a/test_x.py", "2"),
        _item(TESTS / "a/test_s.py", "1"), _item(TESTS / "a/test_s.py", "2", slow=True),
        _item(TESTS / long, "1"), _item(TESTS / long, "2"), _item(TESTS / longer, "1"),
        _item(Path("/elsewhere/test_y.py"), "1"),
    ]  # fmt: skip
    pytest_collection_modifyitems(items)
    got = [(str(i.path.relative_to(TESTS)) if i.path.is_relative_to(TESTS) else "y", i.name)
           for i in items]  # fmt: skip
    assert got == [
        (longer, "1"), (long, "1"), (long, "2"), ("a/test_s.py", "1"), ("a/test_s.py", "2"),
        ("a/test_x.py", "1"), ("a/test_x.py", "2"), ("y", "1"),
    ]  # fmt: skip
