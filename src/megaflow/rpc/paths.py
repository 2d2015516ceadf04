"""Confining file paths of the sandbox APIs to the sandbox's own writable areas.

A remote caller names files relative to the workdir (``src/app.py``), or by
an absolute path under the workdir (``/workspace/src/app.py``) or under the
sandbox's private scratch directory ``/tmp`` (where agents and the replay
model keep patches). Anything else, an absolute path elsewhere (``/etc``,
``/proc``) or ``..`` climbing out, is refused before the sandbox is touched.
"""

from __future__ import annotations

import posixpath

from megaflow.core.errors import InvalidInput

MAX_PATH_CHARS = 4096
SCRATCH = ("/tmp",)
"""Directories every sandbox has of its own, besides its workdir."""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def confine(path: str, workdir: str, scratch: tuple[str, ...] = SCRATCH) -> str:
    """The absolute, normalized form of ``path``, inside ``workdir`` or a ``scratch`` dir.

    Raises ``InvalidInput`` for an empty path, a NUL byte, or a path that
    resolves anywhere else.
    """
    if not path:
        raise InvalidInput("empty path; name a file relative to the sandbox workdir")
    if "\x00" in path or len(path) > MAX_PATH_CHARS:
        raise InvalidInput(f"invalid path {path[:80]!r}: NUL byte or longer than {MAX_PATH_CHARS}")
    root = posixpath.normpath(workdir)
    if not posixpath.isabs(root):
        raise InvalidInput(f"sandbox workdir {workdir!r} is not absolute")
    full = posixpath.normpath(posixpath.join(root, path))
    if not any(_under(full, r) for r in (root, *scratch)):
        raise InvalidInput(
            f"path {path!r} is outside the sandbox workdir {root} (and {', '.join(scratch)}); "
            "use a path relative to the workdir, without '..'"
        )
    return full
