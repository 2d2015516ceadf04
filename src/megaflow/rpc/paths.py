"""Confining file paths of the sandbox APIs to the sandbox's workdir.

A remote caller names files relative to the workdir (``src/app.py``) or by
an absolute path under it (``/workspace/src/app.py``). Anything else, an
absolute path elsewhere or ``..`` climbing out, is refused before the
sandbox is touched.
"""

from __future__ import annotations

import posixpath

from megaflow.core.errors import InvalidInput

MAX_PATH_CHARS = 4096


def confine(path: str, workdir: str) -> str:
    """The absolute, normalized form of ``path`` inside ``workdir``.

    Raises ``InvalidInput`` for an empty path, a NUL byte, or a path that
    resolves outside ``workdir``.
    """
    if not path:
        raise InvalidInput("empty path; name a file relative to the sandbox workdir")
    if "\x00" in path or len(path) > MAX_PATH_CHARS:
        raise InvalidInput(f"invalid path {path[:80]!r}: NUL byte or longer than {MAX_PATH_CHARS}")
    root = posixpath.normpath(workdir)
    if not posixpath.isabs(root):
        raise InvalidInput(f"sandbox workdir {workdir!r} is not absolute")
    full = posixpath.normpath(posixpath.join(root, path))
    if full != root and not full.startswith(root.rstrip("/") + "/"):
        raise InvalidInput(
            f"path {path!r} is outside the sandbox workdir {root}; "
            "use a path relative to it, without '..'"
        )
    return full
