#!/usr/bin/env bash
# `make images-smoke`: start each built image's entrypoint from its mounted root (deploy/smoke.py says how
# and what is checked), inside a network namespace of its own that has only a loopback interface: the
# servers listen on 0.0.0.0 as in a container, and only this check can reach them. Needs root, podman,
# bubblewrap and unshare (util-linux).
#
#   deploy/smoke.sh [bot] [runner-cpu] [runner-cuda]     (default: each image that exists)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "smoke: run as root (podman image mount, a network namespace)" >&2; exit 2; }
exec unshare --net sh -c 'ip link set lo up && exec python3 deploy/smoke.py "$@"' smoke "$@"
