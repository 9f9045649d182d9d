#!/usr/bin/env bash
# Prepare, on a machine with internet, the folder that benchmarks/gpu_check.sh installs from on a GPU host
# without it: wheels of the runner's Python dependencies (and pytest, httpx) for that host's Python, and
# the Debian packages of bubblewrap and libseccomp.  torch is not among them: the GPU host brings its own
# CUDA build.
#
#   benchmarks/gpu_wheels.sh [DIR]          default DIR: build/gpu-wheels (ignored by git; carry it)
#   GPU_PYTHON_VERSION=3.12 (default)       the GPU host's Python
#
# The versions are those of requirements/lock.txt, so the GPU host runs what CI tested.  The folder is
# well under the 64 MiB the device tool carries (numpy is the largest part, ~17 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build/gpu-wheels}
PY_VERSION=${GPU_PYTHON_VERSION:-3.12}
PIP=${PIP:-.venv/bin/pip}
[ -x "$PIP" ] || PIP=/work/main/.venv/bin/pip
[ -x "$PIP" ] || PIP="python3 -m pip"

# What the runner imports (runner/*.py), what the tests and the latency script import, no more.  uvicorn
# without [standard]: the runner serves with its own h11 protocol (runner/api.py).
PACKAGES=(fastapi uvicorn h11 pyseccomp numpy httpx pytest prometheus-client)
pins=()
for name in "${PACKAGES[@]}"; do
  pin=$(grep -iE "^${name}==" requirements/lock.txt | head -1 | cut -d' ' -f1)
  [ -n "$pin" ] || { echo "gpu_wheels: $name is not in requirements/lock.txt" >&2; exit 2; }
  pins+=("$pin")
done

rm -rf "$DIR"
mkdir -p "$DIR/wheels" "$DIR/debs"
printf '%s\n' "${pins[@]}" > "$DIR/requirements.txt"
# Binary wheels only (nothing is built on the GPU host), for its Python and platform; dependencies follow.
$PIP download --quiet --only-binary=:all: --implementation cp --python-version "$PY_VERSION" \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$DIR/wheels" -r "$DIR/requirements.txt"

# bubblewrap and libseccomp as .deb files: extracted there with dpkg -x when missing (no apt there).
(cd "$DIR/debs" && apt-get download bubblewrap libseccomp2 >/dev/null)

echo "gpu_wheels: $(ls "$DIR/wheels" | wc -l) wheels, $(ls "$DIR/debs" | wc -l) packages, $(du -sh "$DIR" | cut -f1) in $DIR"
