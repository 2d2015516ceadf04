"""The shell scripts a sandbox's container runs: its idle main process, kill, reset, snapshot.

Plain strings that need only a POSIX shell, ``grep``, ``tar`` and ``find`` in
the image (busybox is enough), kept apart from the Docker SDK so every
backend whose sandboxes are containers (``container``, ``kubernetes``) runs
the same ones; :mod:`megaflow.environment.container.exec` says how a timeout
uses them.
"""

from __future__ import annotations

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
