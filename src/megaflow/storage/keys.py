"""Validation of artifact keys, shared by every artifact store."""

from __future__ import annotations

from megaflow.core.errors import ArtifactKeyError

MAX_KEY_LENGTH = 1024


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative slash-separated path, else raise.

    Rejected: empty keys, absolute paths, ``..`` or ``.`` segments, empty
    segments, backslashes, NUL and other control characters, over-long keys.
    """
    if not isinstance(key, str) or not key:
        raise ArtifactKeyError("artifact key must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise ArtifactKeyError(f"artifact key is {len(key)} characters; the limit is 1024")
    if key.startswith("/") or (len(key) > 1 and key[1] == ":"):
        raise ArtifactKeyError(f"artifact key {key[:80]!r} is absolute; use a relative key")
    if "\\" in key or any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise ArtifactKeyError(f"artifact key {key[:80]!r} contains a backslash or control char")
    for part in key.split("/"):
        if part in ("", ".", ".."):
            raise ArtifactKeyError(
                f"artifact key {key[:80]!r} has an empty, '.' or '..' segment; "
                "keys must stay inside the store"
            )
    return key
