# SWE-ReX bash sessions over one-shot exec (megaflow.environment.swerex).
#
# A session is one long-lived bash reading commands from the FIFO DIR/in.
# Command N is the file DIR/c.N; the session sources it with stdin on
# /dev/null and its output in DIR/out.N, then writes "N <status>" to the FIFO
# DIR/done, which it holds open read-write (so writing never blocks and no
# line is lost between two waiters). Every operation below is one exec.
#
#   bash session.sh start DIR              -> the shell's pid
#   bash session.sh run DIR N TIMEOUT_US   -> status line, then the output
#   bash session.sh interrupt DIR N TIMEOUT_US RETRIES
#   bash session.sh close DIR
#
# A status line is an exit code, "syntax" (the command did not parse; bash's
# message follows), "timeout" (still running) or "exited [code]" (the shell
# is gone). TIMEOUT_US is in microseconds, 0 for none.
set -u
op=$1 d=$2

now_us() { echo "${EPOCHREALTIME/./}"; }

descendants() {
  local p
  for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$p"
    descendants "$p"
  done
}

# wait_for N TIMEOUT_US: the status of command N, read from fd 3.
wait_for() {
  local n=$1 t=$2 end=0 left left_us tag code
  ((t > 0)) && end=$(($(now_us) + t))
  while :; do
    left=1
    if ((end)); then
      left_us=$((end - $(now_us)))
      ((left_us <= 0)) && { echo timeout; return; }
      ((left_us < 1000000)) && left=$(printf '0.%06d' "$left_us")
    fi
    if read -r -t "$left" -u 3 tag code; then
      [ "$tag" = "$n" ] && { echo "$code"; return; }
      [ "$tag" = exit ] && { echo "exited $code"; return; }
    elif ! kill -0 "$pid" 2>/dev/null; then
      echo exited
      return
    fi
  done
}

finish() {  # STATUS N: print the status and, unless still running, the output
  echo "$1"
  if [ "$1" != timeout ] && [ -e "$d/out.$2" ]; then
    cat "$d/out.$2"
    rm -f "$d/out.$2" "$d/c.$2"
  fi
}

case $op in
start)
  rm -rf "$d" && mkdir -p "$d" && mkfifo "$d/in" "$d/done" || exit 1
  # The FIFO is opened here, before the fork, and the shell inherits it: a
  # FIFO's data is dropped when its last opener closes it, so writing before
  # the shell had opened it itself could lose the first line on a busy host.
  exec 4<>"$d/in"
  set -m  # its own process group (its pid is the group id), SIGINT not ignored
  bash --norc --noprofile 0<&4 4<&- >>"$d/log" 2>&1 &
  pid=$!
  echo "$pid" >"$d/pid"
  # An interrupt ends the command being sourced, not the session.
  printf '%s\n' "exec 9<>$(printf %q "$d/done"); trap 'return 130 2>/dev/null' INT;" \
    "trap 'echo exit \$? 1<>$(printf %q "$d/done")' EXIT" >&4
  exec 4<&-
  echo "$pid"
  ;;
run)
  n=$3 t=$4 pid=$(cat "$d/pid")
  if ! bash -n "$d/c.$n" 2>"$d/syntax.$n"; then
    echo syntax
    cat "$d/syntax.$n"
    rm -f "$d/syntax.$n" "$d/c.$n"
    exit 0
  fi
  rm -f "$d/syntax.$n"
  exec 3<>"$d/done"
  printf '{ . %q; } 9>&- </dev/null >%q 2>&1; echo "%s $?" >&9\n' \
    "$d/c.$n" "$d/out.$n" "$n" 1<>"$d/in"
  finish "$(wait_for "$n" "$t")" "$n"
  ;;
interrupt)
  n=$3 t=$4 tries=$5 pid=$(cat "$d/pid")
  exec 3<>"$d/done"
  status=timeout
  for ((i = 0; i < tries; i++)); do
    kill -INT -- -"$pid" 2>/dev/null  # the session's process group
    status=$(wait_for "$n" "$t")
    [ "$status" != timeout ] && break
  done
  if [ "$status" = timeout ]; then  # what ignores SIGINT: kill all but the shell
    kill -KILL $(descendants "$pid") 2>/dev/null
    status=$(wait_for "$n" 1000000)
  fi
  finish "$status" "$n"
  ;;
close)
  pid=$(cat "$d/pid" 2>/dev/null) && kill -KILL -- -"$pid" 2>/dev/null
  rm -rf "$d"
  ;;
esac
