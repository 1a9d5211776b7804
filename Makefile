# Entry points. `make test` is what CI runs (.ci/run); it installs what it needs itself.

CARGO ?= cargo
PYTHON ?= python3

.PHONY: test check unit python-test vm-test fuzz-test demo bench python-deps deps

## Everything: formatting, lints, unit and integration tests, Python readers, multi-node guests.
test: check browser-deps unit python-test fuzz-test vm-test

check:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## What the tests use beyond the toolchains (gfortran, clang, libomp-dev, cmake).
deps:
	tests/install-deps

unit: deps
	$(CARGO) test --workspace

## Chromium, for the test that opens the HTML report in a headless browser.
.PHONY: browser-deps
browser-deps:
	command -v chromium >/dev/null 2>&1 || { apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

python-deps:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt

python-test: python-deps
	$(CARGO) build -p numalens
	$(PYTHON) -m pytest -q tests/python

## Every reader under libFuzzer for FUZZ_SECONDS each (installs nightly and cargo-fuzz when missing),
## built without optimisations: the optimised build alone took ten minutes.
FUZZ_SECONDS ?= 40
FUZZ_BUILD ?= dev
fuzz-test:
	FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run-all $(FUZZ_SECONDS)

## Multi-node tests in QEMU guests (installs qemu, a Debian kernel, busybox when missing).
vm-test:
	tests/vm/run-all

demo:
	$(CARGO) run --release -- demo

bench:
	bench/format
