# The two commands a newcomer needs (see README.md):
#   make play   - set up everything, then play today's challenge in the terminal (SQLite, no tokens)
#   make test   - set up everything, then run the whole test suite
# Everything else here is what those two call.

VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: play test setup sandbox runner lint bench

play: setup
	$(BIN)/rankzero play

test: setup
	$(BIN)/python -m pytest

setup: $(STAMP) sandbox

# Reinstall when the dependency list changes. torch is pinned in pyproject.toml (CPU build).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[runner,dev,optimizer]'
	touch $(STAMP)

# The runner's sandbox is bubblewrap, its syscall filter is compiled with libseccomp (Debian packages;
# the Python bindings, pyseccomp, come with the runner extra). Installed with apt when missing.
sandbox:
	@{ command -v bwrap >/dev/null 2>&1 && /sbin/ldconfig -p | grep -q 'libseccomp\.so\.2'; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing bubblewrap and libseccomp (the runner's sandbox and its syscall filter)"; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq bubblewrap libseccomp2; }

runner: setup
	$(BIN)/rankzero-runner serve

lint: setup
	$(BIN)/ruff check bot questions runner tests benchmarks
	$(BIN)/mypy bot/core bot/storage

bench: setup
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/runner_latency.py
