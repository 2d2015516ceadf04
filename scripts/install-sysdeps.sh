#!/usr/bin/env bash
# Install the system packages MegaFlow's tests and main job need, when run as
# root and they are missing. Without root, say what is missing and go on.
#
#   scripts/install-sysdeps.sh          install what is missing (as root)
#   scripts/install-sysdeps.sh --check  list what is missing; exit 1 if anything is
#
# Every external program the code or the tests run is named here, with the
# Debian package providing it (tests/test_sysdeps.py keeps the two in step).
# Packages are installed with --no-install-recommends, so programs that other
# programs start (podman's conmon, runc, crun and catatonit) are named too.
set -euo pipefail

# binary:package pairs; a binary kept off PATH is named by its absolute path
NEEDED=(
  "bwrap:bubblewrap"                      # local sandboxes
  "setpriv:util-linux"                    # local sandboxes: bwrap as an unprivileged uid
  "podman:podman"                         # container runtime (Docker-compatible service)
  "conmon:conmon"                         # podman's container monitor
  "runc:runc"                             # the OCI runtime podman is told to use
  "crun:crun"                             # the other OCI runtime: podman peers on crun (benchmarks)
  "/usr/libexec/podman/catatonit:catatonit"  # podman --init: PID 1 of each container
  "newuidmap:uidmap"                      # user-namespace id maps (podman, bwrap)
  "newgidmap:uidmap"
  "git:git"                               # repositories, bundles, patches
  "busybox:busybox-static"                # the busybox sandbox image
  "sh:dash"                               # /bin/sh, the sandbox launcher's shell
  "bash:bash"                             # this script; tests run it
  "python3:python3"                       # the exec server inside local sandboxes
  "pytest-3:python3-pytest"               # `python3 -m pytest` in host-image sandboxes
  "mount:mount"                           # tests: tmpfs for disk-full runs
  "umount:mount"                          # sandbox and podman mount cleanup
  "runuser:util-linux"                    # tests: PostgreSQL as a non-root user
  "nsenter:util-linux"                    # tests: a look into a sandbox's namespaces
  "unshare:util-linux"                    # tests: the contract suite's namespace escape attempt; benchmarks: crun's mount namespace
  "taskset:util-linux"                    # benchmarks: the rollout on 1 and on 2 cores (bench_cores)
  "chrt:util-linux"                       # tests: an agent changing its spawner's scheduling policy
  "prlimit:util-linux"                    # tests: an agent lowering its spawner's limits
  "pkill:procps"                          # tests: an agent killing every spawner it sees
  "ps:procps"                             # tests: the processes left in a sandbox
  "useradd:passwd"                        # tests: that user
  "initdb:postgresql"                     # tests: a throw-away PostgreSQL
  "pg_ctl:postgresql"
  "postgres:postgresql"
  "redis-server:redis-server"             # tests: Redis queue and events
  "redis-cli:redis-tools"                 # tests: Redis cluster setup
  "promtool:prometheus"                   # tests: alert rules
  "prometheus:prometheus"                 # tests: alerts fired by a real Prometheus
  "openssl:openssl"                       # tests: self-signed TLS certificates
  "chromium:chromium"                     # tests: the dashboard in a real browser (Playwright)
  "ldd:libc-bin"                          # tests: the libraries of git, copied into test images
  "strace:strace"                         # benchmarks: mount calls per sandbox start
)

have() {
  local bin="$1"
  if [[ "$bin" == /* ]]; then
    [ -x "$bin" ]
    return
  fi
  command -v "$bin" >/dev/null 2>&1 && return 0
  # sbin is not on every user's PATH
  [ -x "/usr/sbin/$bin" ] || [ -x "/sbin/$bin" ] && return 0
  # Debian keeps PostgreSQL's server binaries off PATH, in /usr/lib/postgresql/<version>/bin
  compgen -G "/usr/lib/postgresql/*/bin/$bin" >/dev/null
}

missing_binaries() {
  local pair
  for pair in "${NEEDED[@]}"; do
    have "${pair%:*}" || echo "$pair"
  done
}

mapfile -t absent < <(missing_binaries)
if [ "${1:-}" = "--check" ]; then
  if [ ${#absent[@]} -eq 0 ]; then
    echo "megaflow: all ${#NEEDED[@]} system binaries present"
    exit 0
  fi
  printf 'megaflow: missing %s (package %s)\n' \
    $(for pair in "${absent[@]}"; do echo "${pair%:*} ${pair##*:}"; done) >&2
  exit 1
fi
if [ ${#absent[@]} -eq 0 ]; then
  exit 0
fi
mapfile -t missing < <(for pair in "${absent[@]}"; do echo "${pair##*:}"; done | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "megaflow: missing system packages: ${missing[*]} (install them with your package manager)" >&2
  exit 0
fi
echo "megaflow: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
mapfile -t still < <(missing_binaries)
if [ ${#still[@]} -ne 0 ]; then
  echo "megaflow: still missing after install: ${still[*]}" >&2
  exit 1
fi
