# writerlock: `make run` runs the demo on a temporary SQLite database;
# `make test` installs what the tests need and runs every test.
SHELL := /bin/bash
CARGO ?= cargo
PREFIX ?= /usr/local
VENV ?= $(CURDIR)/.venv
export PATH := $(CURDIR)/.tools/bin:$(PATH)
# The tests build the C library, the PHP extension and the Python module with
# the dev profile, sharing the test build's artifacts instead of compiling
# everything a second time optimised.
export WL_PROFILE ?= dev

.PHONY: deps build run test test-all test-rust test-c test-examples test-php test-python test-cli \
        check-header header install bench bench-readme check-bench-readme lint fmt clean mutants breakages

## deps: install missing Debian packages (as root) and the project venv.
deps:
	@tests/deps.sh

## build: the core, the C library and the command, optimised.
build:
	$(CARGO) build --release -p writerlock -p writerlock-c -p writerlock-cli

## run: the main job, the contention demo on a temporary SQLite database.
run: build
	target/release/writerlock demo

## test: everything, against a throwaway PostgreSQL cluster.
test: deps
	@tests/with-postgres.sh $(MAKE) --no-print-directory test-all

test-all: lint check-header check-bench-readme test-rust test-c test-examples test-cli test-php test-python

## test-rust: the core's tests, the C binding's unit tests (its panic boundary
## among them) and the bench crate's tests.
test-rust:
	$(CARGO) test -p writerlock -p writerlock-c -p writerlock-bench

test-c:
	@bindings/tests/run.sh

## test-examples: every C and Rust example of the README and docs/, built against the installed package and run.
test-examples:
	@examples/run.sh

test-cli:
	$(CARGO) test -p writerlock-cli -- --test-threads=1

test-php:
	@php-ext/tests/run.sh

test-python:
	@python/tests/run.sh

## mutants: mutation testing of the core's queue, hand-off, lock-file, wait, polling, Postgres
## writer and floor modules with cargo-mutants (not in make test: hours on 2 cores; MODULES=...
## picks modules); reports in mutants.out/.
mutants:
	@tests/mutants.sh

## breakages: breaks the code on purpose (flock() locking nothing, lock files without
## O_CLOEXEC, ...) in a scratch copy of the tree and shows which tests of each host's suite
## fail; slow, not part of `make test`. ARGS: breakages and options (tests/breakages.sh --help).
breakages: deps
	@nice -n 10 tests/breakages.sh $(ARGS)

## lint: formatting and clippy over the whole workspace.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## header: regenerate include/writerlock.h; check-header fails on drift.
header:
	bindings/header.sh include/writerlock.h

check-header:
	@bindings/check-header.sh

## install: the command, libraries, header and pkg-config file under PREFIX, stripped
## (DEBUG_INFO=separate keeps the debug information beside them, DEBUG_INFO=keep unstripped).
install: build
	@WL_PROFILE=release DEBUG_INFO="$(DEBUG_INFO)" bindings/install.sh "$(PREFIX)"

## bench: measured figures, side by side (QUICK=1 for a short run); a complete
## full run also records them in bench/results/MACHINE.json (bench/README.md).
bench: build
	@bench/run.sh

## bench-readme: docs/performance.md's figures from the newest committed results.
bench-readme:
	@python3 bench/readme.py write

## check-bench-readme: fails when docs/performance.md's figures differ from their results file.
check-bench-readme:
	@python3 bench/readme.py check

clean:
	$(CARGO) clean
	rm -rf .venv .tools
