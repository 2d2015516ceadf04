#!/usr/bin/env bash
# Install the system packages MegaFlow's tests and main job need, when run as
# root and they are missing. Without root, say what is missing and go on.
set -euo pipefail

# binary:package pairs
NEEDED=(
  "bwrap:bubblewrap"
  "podman:podman"
  "runc:runc"
  "newuidmap:uidmap"
  "git:git"
  "busybox:busybox-static"
  "pytest-3:python3-pytest"
  "initdb:postgresql"
  "redis-server:redis-server"
  "redis-cli:redis-tools"
  "promtool:prometheus"
  "openssl:openssl"
)

missing=()
for pair in "${NEEDED[@]}"; do
  bin="${pair%%:*}"; pkg="${pair##*:}"
  # Debian keeps PostgreSQL's server binaries off PATH, in /usr/lib/postgresql/<version>/bin
  command -v "$bin" >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/$bin" >/dev/null \
    || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "megaflow: missing system packages: ${missing[*]} (install them with your package manager)" >&2
  exit 0
fi
echo "megaflow: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
