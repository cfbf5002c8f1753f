# netweave — two commands do everything on a fresh machine:
#   make plan   set up, then run `netweave plan` on the built-in example cluster (page: netweave-out/index.html)
#   make test   set up, then lint (rustfmt, clippy, ruff, mypy) and run the whole test suite (Rust, Python, tool integration)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.netweave-installed
SOURCES := $(shell find crates python -name '*.rs' -o -name '*.py' -o -name 'Cargo.toml') Cargo.toml pyproject.toml

# Debian packages the integration tests drive (the real InfiniBand simulator, diagnostics and subnet manager;
# Open MPI for the MPI mapping test, whose headers mpi4py compiles against during setup, and MPICH
# beside it (Open MPI stays the default `mpicc`) for nwbench; a C compiler for the executors under
# runtime/; iproute2 for the emulated cluster; Chromium, headless, for the test that opens the plan's page).
SYSTEM_PACKAGES := ibsim-utils infiniband-diags opensm openmpi-bin libopenmpi-dev mpich libmpich-dev gcc make iproute2 chromium
# Peers only the benchmarks under benches/ run (Scotch's scotch_gmap for the mapper).
BENCH_PACKAGES := scotch

.PHONY: plan test setup runtime system-deps bench-deps test-rust test-python bench fuzz clean wheel lint

plan: setup
	$(BIN)/netweave plan --out netweave-out
	@echo "open netweave-out/index.html in a browser for the page"

test: system-deps setup lint test-rust test-python

setup: system-deps $(STAMP) runtime

# The real-run executors (C), built in runtime/build.
runtime: system-deps
	$(MAKE) -C runtime --no-print-directory

$(STAMP): $(SOURCES) requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	VIRTUAL_ENV=$(abspath $(VENV)) $(BIN)/maturin develop --release --quiet
	touch $@

# A wheel that works outside the checkout (pip install it anywhere): the C runtime, built for
# every MPI installed here, ships inside it as package data (python/netweave/_runtime, removed
# again after the build). Needs `make setup` first for maturin.
WHEEL_DIR ?= target/wheels
PACKAGE_RUNTIME := python/netweave/_runtime
wheel: runtime
	rm -rf $(PACKAGE_RUNTIME)
	$(MAKE) -C runtime --no-print-directory package DEST=$(abspath $(PACKAGE_RUNTIME))
	$(BIN)/maturin build --release --quiet --out $(WHEEL_DIR); status=$$?; rm -rf $(PACKAGE_RUNTIME); exit $$status

system-deps bench-deps: PACKAGES = $(if $(filter bench-deps,$@),$(BENCH_PACKAGES),$(SYSTEM_PACKAGES))
system-deps bench-deps:
	@missing=""; for p in $(PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "missing Debian packages:$$missing (install them as root)"; exit 1; fi; \
	  echo "installing$$missing"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# Lint, the first step of `make test`: rustfmt's check, clippy with warnings as errors (core and
# bindings), then ruff and mypy on the Python (their rules and settings are in pyproject.toml;
# both pinned in requirements-dev.txt).
lint: setup
	cargo fmt --check
	cargo clippy -p netweave-core -p netweave-py -- -D warnings
	$(BIN)/ruff check python tests benches
	$(BIN)/mypy

test-rust:
	cargo test -p netweave-core

test-python: setup
	$(BIN)/pytest -q
	$(BIN)/pytest -q --doctest-modules python/netweave

# Every file reader fed hostile bytes, far longer than the bounded run `make test` includes
# (crates/netweave-core/tests/fuzz_readers.rs; FUZZ_CASES per reader).
FUZZ_CASES ?= 20000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p netweave-core --test fuzz_readers

bench: setup bench-deps
	cargo bench -p netweave-core --bench topology
	cargo bench -p netweave-core --bench analysis
	cargo bench -p netweave-core --bench flitsim
	cargo bench -p netweave-core --bench mapping

clean:
	rm -rf $(VENV) target
	$(MAKE) -C runtime clean
