# The two commands a newcomer needs (see README.md):
#   make play   - set up everything, then play today's challenge in the terminal (SQLite, no tokens)
#   make test   - set up everything, then run the whole test suite
#   make test-fast - the in-process tests only (a few minutes), for the inner loop
# Everything else here is what those two call.

VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Every package and version CI tested, with hashes (bot + runner + dev extras, Linux, Python 3.11, torch
# 2.13.0 CPU). `make lock` regenerates it from pyproject.toml; see README.md, "Dependencies".
LOCK   := requirements/lock.txt

.PHONY: play test test-fast setup sandbox browser runner lint bench lock gpu-wheels gpu-check deploy-check images images-smoke deploy-env

play: setup
	$(BIN)/rankzero play

# The suite can run on several pytest-xdist workers (`make test TEST_WORKERS=3`): most of its time is
# spent waiting on processes (sandboxes, serve, the CLI), not computing. Every sandbox test goes to one
# worker, one at a time as in a serial run (they share the host's cgroups and cores); the rest is spread
# over all of them (tests/xdist_groups.py). CI's run (`make test`) stays in one process until parallel runs
# have passed on a quiet machine often enough to trust: see README.md, "Tests", for the figures.
TEST_WORKERS ?= 1
# The fast tier in one process too: with 2 workers it saved 15 % and one test (a PostgreSQL outage) failed.
FAST_WORKERS ?= 1
XDIST         = $(if $(filter-out 0 1,$(1)),-n $(1) --dist loadgroup)

test: setup
	$(BIN)/python -m pytest $(call XDIST,$(TEST_WORKERS))

# The inner loop: the in-process tier only (no sandboxes, no processes, nothing marked slow; PostgreSQL
# included). tests/conftest.py marks each test; `make test` (CI's command) still runs everything.
FAST := not slow and not sandbox and not process

test-fast: setup
	$(BIN)/python -m pytest $(call XDIST,$(FAST_WORKERS)) -m "$(FAST)"

setup: $(STAMP) sandbox

# Reinstall when the lock changes: exactly the locked versions (hash-checked), then RankZero itself without
# resolving anything again (--no-deps), so a fresh clone installs what was tested.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Re-resolve the lock after a change to pyproject.toml's dependencies, keeping every pin that still fits;
# `make lock UPGRADE=1` moves every package to the newest release its range allows. Run it on Linux with
# Python 3.11, where pip finds the torch 2.13.0 CPU wheel. Review the diff, run `make test`, commit all four.
# The images' locks (deploy/README.md, "Images") are cut from it, constrained to its versions, so every
# image installs what CI tested:
#   lock-bot.txt     the bot image: RankZero's own dependencies, no extras (no torch, no dev tools)
#   lock-runner.txt  the CPU runner image: the runner extra, torch 2.13.0+cpu
#   lock-cuda.txt    the CUDA runner image: the runner extra with torch's CUDA build (PyPI's Linux wheel,
#                    with its nvidia-* libraries), resolved without the local find-links that offer +cpu;
#                    by pip's resolver, for the image's platform only (deploy/lock_from_report.py says why)
LOCK_BOT    := requirements/lock-bot.txt
LOCK_RUNNER := requirements/lock-runner.txt
LOCK_CUDA   := requirements/lock-cuda.txt
LOCK_PINS   := build/lock-pins.txt
COMPILE     := CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe \
  --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host

lock: setup
	$(COMPILE) $(if $(UPGRADE),--upgrade) --extra runner --extra dev --extra optimizer -o $(LOCK) pyproject.toml
	mkdir -p $(dir $(LOCK_PINS))
	sed -n 's/^\([A-Za-z0-9][^ ]*==[^ ]*\).*/\1/p' $(LOCK) > $(LOCK_PINS)
	$(COMPILE) -c $(LOCK_PINS) -o $(LOCK_BOT) pyproject.toml
	$(COMPILE) -c $(LOCK_PINS) --extra runner -o $(LOCK_RUNNER) pyproject.toml
	grep -v '^torch==' $(LOCK_PINS) > $(LOCK_PINS).cuda
	env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null $(BIN)/pip install --quiet --dry-run --ignore-installed \
	  --report $(LOCK_PINS).cuda.json -c $(LOCK_PINS).cuda '.[runner]'
	$(BIN)/python deploy/lock_from_report.py $(LOCK_PINS).cuda.json > $(LOCK_CUDA)
	@! grep -q '^torch==' $(LOCK_BOT) || { echo "$(LOCK_BOT) pulls torch"; exit 1; }
	@grep -q '^torch==.*+cpu' $(LOCK_RUNNER) || { echo "$(LOCK_RUNNER) lacks the CPU torch"; exit 1; }
	@! grep -q '^torch==.*+cpu' $(LOCK_CUDA) || { echo "$(LOCK_CUDA) has the CPU torch"; exit 1; }

# The runner's sandbox is bubblewrap, its syscall filter is compiled with libseccomp (Debian packages;
# the Python bindings, pyseccomp, come with the runner extra). Installed with apt when missing.
sandbox:
	@{ command -v bwrap >/dev/null 2>&1 && /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2'; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing bubblewrap and libseccomp (the runner's sandbox and its syscall filter)"; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq bubblewrap libseccomp2; }

# Headless Chromium for the web page's browser test (tests/bot/adapters/web/test_web_chromium.py, which
# skips without it). Not part of setup: .ci/run installs it; apt is asked only when no binary is found.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing chromium (headless, for the web page's screenshot test)"; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends chromium; }

runner: setup
	$(BIN)/rankzero-runner serve

# ruff (rules and format), mypy --strict over every package, and the import contracts (.importlinter).
# .ci/run runs it before the tests: a lint failure fails CI.
lint: setup
	$(BIN)/ruff check bot questions runner tests benchmarks migrations
	$(BIN)/ruff format --check bot questions runner tests benchmarks migrations
	$(BIN)/mypy --strict bot runner questions migrations benchmarks tests
	$(BIN)/lint-imports

bench: setup
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/runner_latency.py

# Issue 23: the runner on a real GPU host.  `make gpu-wheels` (here, with internet) fills build/gpu-wheels
# with what the check installs there (cp312 wheels, bubblewrap/libseccomp .debs); `make gpu-check` (there,
# with a Python whose torch has CUDA: PYTHON=...) runs the GPU tests and the latency comparison and prints
# one summary.  `make gpu-check GPU_CHECK_ARGS=--cpu` runs the same steps on a machine without a GPU.
GPU_WHEELS ?= build/gpu-wheels

gpu-wheels:
	benchmarks/gpu_wheels.sh $(GPU_WHEELS)

gpu-check:
	benchmarks/gpu_check.sh --wheels $(GPU_WHEELS) $(GPU_CHECK_ARGS)

# Issue 26: the Kubernetes manifests (deploy/) rendered with `kubectl kustomize`, validated strictly against
# two Kubernetes versions (kubernetes-validate) and linted by checkov; findings are fixed or explained in
# deploy/README.md. checkov has many dependencies of its own: it gets a virtual environment of its own.
DEPLOY_CHECK_VENV ?= build/deploy-check-venv

$(DEPLOY_CHECK_VENV)/.installed:
	$(PYTHON) -m venv $(DEPLOY_CHECK_VENV)
	$(DEPLOY_CHECK_VENV)/bin/python -m pip install --quiet 'kubernetes-validate>=1.30' 'checkov>=3.2,<4'
	touch $@

deploy-check: $(DEPLOY_CHECK_VENV)/.installed
	VALIDATE=$(DEPLOY_CHECK_VENV)/bin/kubernetes-validate CHECKOV=$(DEPLOY_CHECK_VENV)/bin/checkov deploy/check.sh

# Deploying (README.md, "Deploying"; deploy/README.md, "Images"). `make images` builds the bot, CPU runner
# and CUDA runner images with podman (`make images SKIP_CUDA=1` leaves the several-GB CUDA one out;
# BASE_IMAGE=docker.io/library/python:3.11-slim where a registry can be reached, else a Debian bookworm
# base is built here with mmdebstrap). `make images-smoke` starts each one from its mounted root and
# checks it answers (as root: podman image mount). `make deploy-env` writes .env for compose.yaml with
# fresh random secrets, and never overwrites one.
images:
	deploy/images.sh

images-smoke:
	deploy/smoke.sh

deploy-env:
	python3 deploy/make_env.py .env
