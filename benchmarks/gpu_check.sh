#!/usr/bin/env bash
# One command to check the runner on a GPU host (issue 23, section 3), within 8 minutes on one GPU:
#
#   benchmarks/gpu_check.sh [--wheels DIR] [--cpu] [--neighbour] [--skip-tests]    (or: make gpu-check)
#
# The host needs only a Python whose torch has CUDA (PYTHON, default python3).  What that Python lacks of
# the runner's dependencies is installed from DIR (default build/gpu-wheels, made by
# benchmarks/gpu_wheels.sh) with pip --no-index --target, and bwrap (and libseccomp) extracted from DIR's
# .deb files when the host has none.  Then: the GPU allocator's tests, every runner test marked `gpu`
# (tests/runner/test_gpu.py), the latency comparison on GPU shapes (NCCL 1-rank DDP, DataParallel, a CUDA
# matmul in python mode; warm vs cold vs bare), and one summary.  Exit 0 only when every step passed.
#
# --cpu runs the same steps on a machine without a GPU (the GPU tests skip, the latency comparison runs a
# CPU shape): to know the script works before a GPU host is at hand.  --neighbour adds, when time is left,
# benchmarks/neighbour_slowdown.py (issue 23, section 4) on the host: a GPU host is usually a quiet machine
# with many cores, where that target is meant to be measured.  It is a figure, not a pass/fail step.
# --skip-tests leaves out the two test steps (for a second run on a host where they already passed, when
# device time is short); the summary says so.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=build/gpu-wheels
CPU=0
NEIGHBOUR=0
TESTS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) WHEELS=$2; shift 2 ;;
    --cpu) CPU=1; shift ;;
    --neighbour) NEIGHBOUR=1; shift ;;
    --skip-tests) TESTS=0; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
START=$(date +%s)
WORK=$(mktemp -d /tmp/rankzero-gpu-check-XXXXXX)
SUMMARY=()
FAILED=0
LDCONFIG_ADDED=0
cleanup() {  # keep the logs; drop the installed packages and, if it was added, our folder from ldconfig's cache
  rm -rf "$WORK/site" "$WORK/root"
  [ "$LDCONFIG_ADDED" = 0 ] || /sbin/ldconfig
}
trap cleanup EXIT
say() { echo "gpu_check: $*"; }
step() {  # step NAME SECONDS COMMAND...: run with a time limit, keep the output, record the outcome
  local name=$1 limit=$2; shift 2
  local began rc; began=$(date +%s)
  say "== $name (at most ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$WORK/$name.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || FAILED=1
  local took=$(( $(date +%s) - began ))
  local outcome="ok"; [ "$rc" = 0 ] || outcome="FAILED (exit $rc$([ "$rc" = 124 ] && echo ', time limit'))"
  SUMMARY+=("$name: $outcome, ${took}s")
}

# 1. The host: torch with CUDA (or --cpu).
if ! "$PY" -c 'import torch' 2>/dev/null; then
  say "$PY has no torch: the GPU host must bring torch with CUDA (PYTHON=... to name another Python)"; exit 2
fi
GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')
MACHINE=$("$PY" -c 'import platform, torch
names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())}) if torch.cuda.is_available() else []
print(f"Python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count() if names else 0} GPU(s) {names}")')
say "$MACHINE"
if [ "$GPUS" = 0 ] && [ "$CPU" = 0 ]; then
  say "torch sees no CUDA GPU here; --cpu runs the same steps without one"; exit 2
fi

# 2. The runner's Python dependencies: what the host's Python lacks, from the wheels folder.
missing=()
for module in fastapi uvicorn h11 pyseccomp numpy httpx pytest prometheus_client; do
  "$PY" -c "import $module" 2>/dev/null || missing+=("$module")
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ ${#missing[@]} -gt 0 ]; then
  [ -d "$WHEELS/wheels" ] || { say "missing ${missing[*]} and no $WHEELS/wheels (run benchmarks/gpu_wheels.sh where there is internet)"; exit 2; }
  say "installing ${missing[*]} (and their dependencies) from $WHEELS into $WORK/site"
  "$PY" -m pip install --quiet --no-index --find-links "$WHEELS/wheels" --target "$WORK/site" \
    -r "$WHEELS/requirements.txt" || { say "pip install from $WHEELS failed"; exit 2; }
  # After the repository (its runner/ and tests/ win), before the host's site-packages (pins win).
  export PYTHONPATH="$PWD:$WORK/site"
  SUMMARY+=("installed from $WHEELS: ${missing[*]}")
else
  SUMMARY+=("Python dependencies: all present")
fi

# 3. The sandbox: bwrap and libseccomp from the .deb files when the host has none.
if ! command -v bwrap >/dev/null 2>&1; then
  deb=$(ls "$WHEELS"/debs/bubblewrap_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { say "no bwrap and no bubblewrap .deb in $WHEELS/debs"; exit 2; }
  dpkg -x "$deb" "$WORK/root" && export PATH="$WORK/root/usr/bin:$PATH"
  SUMMARY+=("bwrap: extracted from $(basename "$deb")")
else
  SUMMARY+=("bwrap: $(command -v bwrap)")
fi
if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
  deb=$(ls "$WHEELS"/debs/libseccomp2_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { say "no libseccomp.so.2 and no libseccomp2 .deb in $WHEELS/debs"; exit 2; }
  dpkg -x "$deb" "$WORK/root"
  # pyseccomp finds the library through ldconfig's cache: add the extracted folder to it (root only).
  /sbin/ldconfig "$WORK"/root/usr/lib/x86_64-linux-gnu && LDCONFIG_ADDED=1
  SUMMARY+=("libseccomp: extracted from $(basename "$deb") and added to ldconfig's cache")
fi

# 4. Tests: the allocator and verdict texts (any host), then every runner test marked gpu.  The bot's
# conftest (tests/conftest.py) is left out: it needs the bot's dependencies.
# The host's own pytest plugins (xdist, benchmark, cov...) are not loaded: they were built for its pytest,
# not for the one installed from the wheels, and no runner test needs them.
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
PYTEST=("$PY" -m pytest --confcutdir=tests/runner -p no:cacheprovider -q -rs)
# With --cpu its sandboxed test runs too (it is skipped where there are real GPUs): more time.
if [ "$TESTS" = 1 ]; then
  step gpu-allocation-tests "$([ "$CPU" = 1 ] && echo 300 || echo 60)" "${PYTEST[@]}" tests/runner/test_gpu_allocation.py
  step gpu-tests 200 "${PYTEST[@]}" -m gpu tests/runner
else
  SUMMARY+=("tests: skipped (--skip-tests)")
fi

# 5. Latency: warm (spaced, back to back) vs cold vs bare, on the GPU shapes (a CPU shape with --cpu).
if [ "$CPU" = 1 ]; then
  step latency 200 "$PY" benchmarks/runner_latency.py --shapes 1 --runs 1 --burst 2 --cold --strict --timeout 60
else
  step latency 300 "$PY" benchmarks/runner_latency.py --shapes nccl-1,dp,cuda --runs 2 --burst 3 --cold --strict --timeout 60
fi

# 5b. The neighbour-slowdown figure, only when the 8 minutes leave room for it.
if [ "$NEIGHBOUR" = 1 ] && [ $(( $(date +%s) - START )) -lt 300 ]; then
  failed_before=$FAILED
  step neighbour 150 "$PY" benchmarks/neighbour_slowdown.py --runs 4 --hold 30
  FAILED=$failed_before  # a measurement: its outcome is in the summary, not in the exit status
fi

# 6. One summary.
echo
echo "==================== gpu_check summary ===================="
echo "$MACHINE$([ "$CPU" = 1 ] && echo '   (--cpu: GPU tests skip)')"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
for name in gpu-allocation-tests gpu-tests; do
  [ -f "$WORK/$name.log" ] || continue
  result=$(grep -E '(passed|failed|skipped|error)' "$WORK/$name.log" | tail -1)
  echo "  $name: ${result:-no pytest result line}"
done
echo "  latency:"
if grep -q '^  shape' "$WORK/latency.log"; then
  sed -n '/^  shape/,$p' "$WORK/latency.log" | sed 's/^/  /'
else  # cut off before its table: the runs it timed, as it went
  grep '^\[latency\]' "$WORK/latency.log" | tail -n 30 | sed 's/^/    /'
fi
[ -f "$WORK/neighbour.log" ] && { echo "  neighbour slowdown:"; tail -n 8 "$WORK/neighbour.log" | sed 's/^/  /'; }
echo "  total: $(( $(date +%s) - START ))s (target: 8 minutes on one GPU)"
if [ "$FAILED" = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL (logs in $WORK)"; fi
exit "$FAILED"
