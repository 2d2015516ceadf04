"""The trainer's metrics log: one JSON line per step, written by a background thread.

``train.metrics_path`` names the file. :meth:`MetricsLog.log` only puts the
record on a queue, so an optimizer step never waits on the disk; a daemon
thread appends each record as one line and flushes it, so a reader (``tail
-f``, ``megaflow train diagnose``) sees every step soon after it ends and a
crash loses at most the lines still queued. :meth:`MetricsLog.close` writes
what is queued and stops the thread. A write error is kept and raised by the
next ``log`` or by ``close``.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import json
import queue
import threading
from pathlib import Path
from typing import Any

from megaflow.core.errors import StorageError

_STOP = object()


class MetricsLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: queue.Queue[object] = queue.Queue()
        self._error: OSError | None = None
        self._file = self.path.open("a", encoding="utf-8")
        self._thread = threading.Thread(target=self._write, name="metrics-log", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                self._file.write(json.dumps(item, sort_keys=True) + "\n")
                self._file.flush()
            except OSError as exc:
                self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise StorageError(f"cannot write the metrics log {self.path}: {self._error}")

    def log(self, record: dict[str, Any]) -> None:
        """Queue ``record`` (plain JSON data) as the next line."""
        self._raise()
        self._queue.put(record)

    def close(self) -> None:
        """Write every queued line, then stop."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
            self._file.close()
        self._raise()
