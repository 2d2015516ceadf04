"""Where bubblewrap reaches host paths when it runs as another uid.

Run as root, the local runtime starts bubblewrap as an unprivileged uid
(``setpriv``), which may be unable to traverse the runtime's root or a host
path the config binds. :class:`Staging` binds each such path at a stage
directory that uid can reach (:func:`megaflow.environment.local.userns.stage`)
and answers where bubblewrap sees a host path: below the runtime's root
through the staged root, elsewhere directly or through a stage of its own.
Without a uid change every path is reached as it is and nothing is staged.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from megaflow.environment.local import userns, view


class Staging:
    def __init__(self, root: Path, process: str, ids: userns.IdMap) -> None:
        self.root = root
        self.process = process
        self.ids = ids
        self.stage: Path | None = None
        """``root`` as bubblewrap reaches it, when bound."""
        self._staged: dict[Path, Path] = {}  # host path -> where bubblewrap reaches it
        self._name = ""
        # (image root, workdir) -> (view, (st_dev, st_ino) of the root it was built from)
        self._views: dict[tuple[Path, str], tuple[Path, tuple[int, int]]] = {}
        self._made = 0
        self._lock = threading.Lock()  # starts build views on worker threads

    def view(self, image_root: Path, workdir: str, args: list[str]) -> Path | None:
        """The prepared read-only root (:mod:`.view`) for ``image_root`` and
        ``workdir``, built from bubblewrap-style ``args`` on first use; None when
        nothing can be mounted (not run as root). Blocking."""
        if self.stage is None or self.ids.run_as is None:
            return None
        key = (image_root, workdir)
        st = image_root.stat()
        ident = (st.st_dev, st.st_ino)
        with self._lock:
            known = self._views.get(key)
            if known is not None and known[1] == ident:
                return known[0]
            if known is not None:  # the image was evicted and unpacked again
                userns.unstage(known[0])  # a lazy detach: a live sandbox keeps its root
                del self._views[key]
            return self._build(key, ident, args)

    def _build(self, key: tuple[Path, str], ident: tuple[int, int], args: list[str]) -> Path:
        assert self.ids.run_as is not None
        self._made += 1
        target = userns.STAGE_ROOT / self.process / f"{self._name}-view{self._made}"
        target.mkdir(mode=0o711)
        try:
            view.build(target, args, key[1], self.ids.run_as)
        except BaseException:
            target.rmdir()
            raise
        self._views[key] = (target, ident)
        return target

    def start(self) -> None:
        """Stage the runtime's root if bubblewrap runs as another uid (blocking)."""
        if self.ids.run_as is not None and self.stage is None:
            self._name = uuid.uuid4().hex[:8]
            self.stage = userns.stage(self.root, self.process, self._name)

    def stop(self) -> None:
        """Undo every stage (blocking)."""
        for target in [*(v for v, _ in self._views.values()), *self._staged.values(),
                       *([self.stage] if self.stage else [])]:  # fmt: skip
            userns.unstage(target)
        self._staged.clear()
        self._views.clear()
        self.stage = None

    def seen(self, path: Path) -> Path:
        """``path`` (below the runtime's root) as bubblewrap reaches it."""
        if self.stage is None:
            return path
        return self.stage / path.relative_to(self.root)

    def source(self, path: Path) -> tuple[Path, Path]:
        """(``path``, where bubblewrap reaches it), staging it when its uid cannot
        reach it directly (blocking)."""
        path = path.absolute()
        if self.stage is not None and path.is_relative_to(self.root):
            return path, self.seen(path)
        if self.ids.run_as is None:
            return path, path
        if path not in self._staged and not userns.reachable(path, self.ids.run_as[0]):
            name = f"{self._name}-{len(self._staged)}"
            self._staged[path] = userns.stage(path, self.process, name)
        return path, self._staged.get(path, path)
