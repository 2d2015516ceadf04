from globmatch import filter_paths, match


def test_star_in_same_dir():
    assert match("*.py", "setup.py")
    assert not match("*.py", "setup.cfg")


def test_question_mark():
    assert match("file?.txt", "file1.txt")
    assert not match("file?.txt", "file10.txt")


def test_char_class():
    assert match("[ab].txt", "a.txt")
    assert not match("[!ab].txt", "a.txt")


def test_double_star():
    assert match("src/**/*.py", "src/pkg/sub/b.py")
    assert match("src/**/*.py", "src/a.py")


def test_filter():
    paths = ["a.py", "b.txt", "c.py"]
    assert filter_paths(paths, include=["*.py"], exclude=["c*"]) == ["a.py"]
