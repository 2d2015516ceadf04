"""A train sample's token ids as the text each one adds, for the trajectory page.

The page shows every token as a span of text, coloured by its logprob. The
text of one token is not ``decode([id])``: a byte-level BPE tokenizer splits a
character of several UTF-8 bytes over several tokens, each of which decodes
alone to U+FFFD, and a SentencePiece tokenizer drops the leading space of a
token decoded alone. :func:`token_pieces` therefore decodes incrementally,
as inference servers stream text: each token's piece is what it adds to the
text decoded so far (over a short window, so a long sample costs linear
time), and the tokens of a character still incomplete get an empty piece,
the character going to the token that completes it. Joined, the pieces are
the sample's text.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

TOKENIZER_FILE = "tokenizer.json"
#: A UTF-8 character is at most 4 bytes: a U+FFFD still pending after that many
#: tokens is the model's own (an invalid byte it generated), shown as it is.
_MAX_PENDING = 4


@lru_cache(maxsize=8)
def _load_tokenizer(path: str) -> Any:
    from tokenizers import Tokenizer  # the train extra; without it ids stay ids

    return Tokenizer.from_file(path)


def tokenizer_file(config: Any) -> Path | None:
    """The first ``tokenizer.json`` in a directory the run's config names (a model path,
    a policy, a tokenizer), searched depth first; None when the config names none."""
    if isinstance(config, dict):
        for value in config.values():
            if (found := tokenizer_file(value)) is not None:
                return found
    elif isinstance(config, list):
        for value in config:
            if (found := tokenizer_file(value)) is not None:
                return found
    elif isinstance(config, str) and 0 < len(config) < 4096 and "\n" not in config:
        path = Path(config)
        for candidate in (path / TOKENIZER_FILE, path):
            try:
                if candidate.name == TOKENIZER_FILE and candidate.is_file():
                    return candidate
            except OSError:
                continue
    return None


def token_pieces(tok: Any, ids: list[int]) -> list[str]:
    """The text each of ``ids`` adds when ``tok`` (anything with ``decode(ids,
    skip_special_tokens=...)``) decodes them in order; ``"".join`` of the result is
    the decoded text."""
    pieces: list[str] = []
    start = read = 0  # the window's start, and where its text already shown ends

    def decode(part: list[int]) -> str:
        return str(tok.decode(part, skip_special_tokens=False)) if part else ""

    for end in range(1, len(ids) + 1):
        shown = decode(ids[start:read])
        text = decode(ids[start:end])
        pending = end - read
        if text.endswith("\ufffd") and pending < _MAX_PENDING:
            pieces.append("")  # part of a character: the token completing it shows it
            continue
        # a tokenizer may rewrite the window's head once more text follows; the common
        # prefix is what stays shown
        same = len(shown) if text.startswith(shown) else _common(shown, text)
        pieces.append(text[same:])
        start, read = read, end
    return pieces


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def decode_ids(config: dict[str, Any], ids: list[int]) -> tuple[list[str] | None, str]:
    """Each id's piece of text (:func:`token_pieces`) and where the tokenizer came from
    (the run config ``config`` names it), or None and why there is none."""
    path = tokenizer_file(config)
    if path is None:
        return None, "the run's config names no directory with a tokenizer.json"
    try:
        tok = _load_tokenizer(str(path))
    except ImportError:
        return None, "the tokenizers package is not installed (the train extra)"
    except Exception as exc:  # a file tokenizers cannot read: say so, show the ids
        return None, f"{path}: {exc}"
    return token_pieces(tok, ids), str(path)
