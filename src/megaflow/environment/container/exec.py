"""Running commands in a container through the Docker API exec endpoints.

How a command runs, and how a timeout kills all of it:

* Every exec is tagged with a unique ``MEGAFLOW_EXEC_ID`` environment
  variable. The engine (runc) starts each exec as the leader of a new session
  and process group, and children inherit the variable.
* The output is read on the host from the exec's multiplexed stream; bytes
  past the cap are read and dropped, so a flood cannot fill memory and the
  command is not blocked on a full pipe.
* On timeout the host starts a *second* exec running :data:`KILL_SCRIPT`: it
  SIGKILLs every process carrying the tag, and each one's process group.
  The keeper process (the container's main process) and PID 1 are spared.
  The same script without a tag kills every process but those two; ``reset``
  uses it, then empties ``/tmp`` and restores the workspace snapshot taken
  right after setup (a tar kept in the container, outside the workspace).

The scripts need only a POSIX shell, ``grep``, ``tar`` and ``find`` in the
image (busybox is enough).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from docker.utils.socket import frames_iter

STATE_DIR = "/.megaflow"  # kept across a container restart
RUN_DIR = "/dev/shm"  # fresh at every container start
KEEPER_PID = f"{RUN_DIR}/megaflow-keeper.pid"
IDLE_FIFO = f"{RUN_DIR}/megaflow-idle"
SNAPSHOT = f"{STATE_DIR}/workspace.tar"
EXEC_TAG = "MEGAFLOW_EXEC_ID"

# The container's main process: records its pid, then blocks opening a FIFO
# that nobody writes. It has no child, so ``ps`` in a sandbox shows only what
# the commands started, and killing "everything else" never touches it.
# $0: the workdir; $1 = "snapshot" when the spec puts nothing in the workspace,
# so the first start takes the reset snapshot itself and saves an exec. The
# pid is written last: scripts that wait for it also wait for the snapshot.
KEEPER_SCRIPT = (
    f'mkdir -p {STATE_DIR} "$0" && {{ [ -z "$1" ] || [ -e {SNAPSHOT} ] || '
    f'tar -cf {SNAPSHOT} -C "$0" . ; }} && rm -f {IDLE_FIFO} && mkfifo {IDLE_FIFO} '
    f"&& echo $$ > {KEEPER_PID} && while :; do read -r _ < {IDLE_FIFO}; done"
)

WAIT_KEEPER = (
    f"i=0; while [ ! -s {KEEPER_PID} ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.01; done\n"
)

KILL_SCRIPT = (
    WAIT_KEEPER
    + f"""
tag="$0"; k=$(cat {KEEPER_PID} 2>/dev/null); keep=" 1 $$ $k "; round=0
while [ $round -lt 5 ]; do
  round=$((round+1)); n=0
  for d in /proc/[0-9]*; do
    p=${{d#/proc/}}
    case "$keep" in *" $p "*) continue;; esac
    g=
    if [ -n "$tag" ]; then
      grep -q "{EXEC_TAG}=$tag" "$d/environ" 2>/dev/null || continue
      read -r s < "$d/stat" 2>/dev/null || continue
      s=${{s##*") "}}; set -- $s; g=$3
      case "$keep" in *" $g "*) g=;; esac
    fi
    kill -9 $p 2>/dev/null && n=$((n+1))
    [ -n "$g" ] && kill -9 -$g 2>/dev/null
  done
  [ $n -eq 0 ] && break
done
exit 0
"""
)

# $0: the workdir. Kill everything, empty /tmp, put the workspace back.
RESET_SCRIPT = (
    KILL_SCRIPT.replace('tag="$0"', 'tag=""').replace("exit 0", "")
    + "cd / && find /tmp -mindepth 1 -maxdepth 1 -exec rm -rf {} + && "
    # mount points (a file bound into the workspace) cannot go; the rest must
    + '{ find "$0" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null; true; } && '
    + f'tar -xf {SNAPSHOT} -C "$0"'
)

SNAPSHOT_SCRIPT = WAIT_KEEPER + f'tar -cf {SNAPSHOT} -C "$0" .'


@dataclass
class Output:
    """Capped stdout and stderr of one exec."""

    cap: int
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def take(self, stream: int, data: bytes) -> None:
        buf = self.err if stream == 2 else self.out
        room = self.cap - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf += data


def drain(sock: Any, output: Output) -> None:
    """Read an exec's multiplexed stream until the command's end (blocking)."""
    for stream, data in frames_iter(sock, False):
        if data:
            output.take(stream, data)


def no_timeout(sock: Any) -> None:
    """A long quiet command must not hit the API client's read timeout."""
    for s in (sock, getattr(sock, "_sock", None)):
        if s is not None and hasattr(s, "settimeout"):
            s.settimeout(None)


def abort(sock: Any) -> None:
    """Wake a thread blocked reading ``sock`` and close it."""
    raw = getattr(sock, "_sock", sock)
    try:
        raw.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass
    try:
        sock.close()
    except OSError:
        pass
