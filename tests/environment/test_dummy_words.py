"""The dummy runtime's command splitting: the same words as ``shlex.split``."""

import random
import shlex

import pytest

from megaflow.environment.dummy import split_words

ALPHABET = "ab0 \t\r\n'\"\\#>&|;$\x0b\x0c\x1c\x85\xa0\u2003\x00é"


def test_split_words_is_shlex_split_on_random_commands() -> None:
    rng = random.Random(7)
    plain = 0
    for _ in range(20_000):
        command = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
        try:
            expected = shlex.split(command)
        except ValueError:
            with pytest.raises(ValueError):
                split_words(command)
            continue
        assert split_words(command) == expected, repr(command)
        plain += not any(c in command for c in "'\"\\#")
    assert plain > 1_000  # the fast path was taken often enough to be tested


@pytest.mark.parametrize(
    "command",
    ["echo step 0 > /tmp/s0 && cat /tmp/s0", "a\u2003b", "a\x0bb", "echo 'a b'", "x # y", ""],
)
def test_split_words_examples(command: str) -> None:
    assert split_words(command) == shlex.split(command)
