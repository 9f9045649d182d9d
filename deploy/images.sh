#!/usr/bin/env bash
# `make images`: build the three RankZero images with podman (deploy/README.md, "Images").
#
#   deploy/images.sh [bot] [runner-cpu] [runner-cuda]       (default: all three)
#
# Tags: localhost/rankzero-bot:latest, localhost/rankzero-runner:cpu, localhost/rankzero-runner:cuda.
# Environment:
#   BASE_IMAGE   the base of all three (default: a Debian bookworm image built here with mmdebstrap, as
#                localhost/rankzero-base:bookworm, where no image registry can be reached; set it to
#                docker.io/library/python:3.11-slim where one can)
#   SKIP_CUDA=1  leave the CUDA runner out (several GB of wheels)
#   PODMAN       the podman command (default: podman)
# pip inside the build uses the index, extra indexes and find-links that pip uses on this machine
# (`pip config list` and PIP_* variables); local folders among them are mounted read-only into the build.
set -euo pipefail

cd "$(dirname "$0")/.."
PODMAN=${PODMAN:-podman}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(bot runner-cpu runner-cuda)
[ "${SKIP_CUDA:-}" != 1 ] || TARGETS=("${TARGETS[@]/runner-cuda/}")

for tool in "$PODMAN" python3; do
  command -v "$tool" >/dev/null || { echo "images: $tool not found (apt-get install podman mmdebstrap)" >&2; exit 2; }
done

# The base: Debian bookworm's minimal variant with Python 3.11 (bookworm's python3) and its venv module.
if [ -z "${BASE_IMAGE:-}" ]; then
  BASE_IMAGE=localhost/rankzero-base:bookworm
  if ! "$PODMAN" image exists "$BASE_IMAGE"; then
    command -v mmdebstrap >/dev/null || { echo "images: mmdebstrap not found (apt-get install mmdebstrap)" >&2; exit 2; }
    mkdir -p build/images
    echo "images: building $BASE_IMAGE with mmdebstrap (a few minutes)"
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates bookworm build/images/base.tar
    "$PODMAN" import --change 'CMD ["/bin/bash"]' build/images/base.tar "$BASE_IMAGE" >/dev/null
    rm -f build/images/base.tar
  fi
fi

# pip's sources on this machine: PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_FIND_LINKS win over pip's
# configuration files, as they do for pip itself.
pip_setting() {  # name (index-url, extra-index-url, find-links) -> value, or nothing
  local env_name="PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')"
  if [ -n "${!env_name:-}" ]; then echo "${!env_name}"; return; fi
  python3 -m pip config list 2>/dev/null | sed -n "s/^[^.]*\.$1='\(.*\)'\$/\1/p" | tail -n 1
}
INDEX_URL=$(pip_setting index-url)
EXTRA_INDEX_URL=$(pip_setting extra-index-url)
FIND_LINKS=$(pip_setting find-links)
CERT=$(pip_setting cert)

BUILD_ARGS=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "PIP_EXTRA_INDEX_URL=$EXTRA_INDEX_URL"
            --build-arg "PIP_FIND_LINKS=$FIND_LINKS")
[ -z "$INDEX_URL" ] || BUILD_ARGS+=(--build-arg "PIP_INDEX_URL=$INDEX_URL")
# A local index's pages link to files beside its simple/ folder (../../files/...): mount its parent.
for source in $INDEX_URL $EXTRA_INDEX_URL; do
  path=${source#file://}
  if [ "${path:0:1}" = / ] && [ -e "$path" ]; then path=$(dirname "$path"); BUILD_ARGS+=(--volume "$path:$path:ro"); fi
done
for source in $FIND_LINKS; do
  path=${source#file://}
  if [ "${path:0:1}" = / ] && [ -e "$path" ]; then BUILD_ARGS+=(--volume "$path:$path:ro"); fi
done
# The certificate authorities this machine's pip trusts (a proxy's own, where one re-signs TLS).
if [ -n "$CERT" ] && [ -f "$CERT" ]; then
  BUILD_ARGS+=(--volume "$CERT:/run/pip-cert.pem:ro" --build-arg PIP_CERT=/run/pip-cert.pem)
fi
# The CPU torch wheel: from a find-links folder that has it, else from PyTorch's CPU index (the default).
TORCH_ARGS=()
for source in $FIND_LINKS; do
  if compgen -G "${source#file://}/torch-*+cpu-*.whl" >/dev/null; then TORCH_ARGS=(--build-arg TORCH_INDEX_URL=); fi
done

build() {  # target tag
  local started=$SECONDS
  echo "images: building $2 from deploy/$1.Containerfile on $BASE_IMAGE"
  "$PODMAN" build --isolation chroot --layers "${BUILD_ARGS[@]}" "${@:3}" -f "deploy/$1.Containerfile" -t "$2" .
  echo "images: $2 built in $((SECONDS - started)) s, $("$PODMAN" image inspect --format '{{.Size}}' "$2") bytes"
}

for target in "${TARGETS[@]}"; do
  case $target in
    bot) build bot localhost/rankzero-bot:latest ;;
    runner-cpu) build runner-cpu localhost/rankzero-runner:cpu "${TORCH_ARGS[@]}" ;;
    runner-cuda) build runner-cuda localhost/rankzero-runner:cuda ;;
    "") ;;
    *) echo "images: unknown image '$target' (bot, runner-cpu, runner-cuda)" >&2; exit 2 ;;
  esac
done
"$PODMAN" images --filter reference='localhost/rankzero-*'
