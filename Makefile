# ClinConsensus Studio — run, test, benchmark.
#
#   make run     install into .venv, migrate, seed the small demo once, serve http://localhost:8501
#   make test    install with test extras, run the whole suite (PostgreSQL and browser tests included)
#   make bench   every benchmarks/bench_*.py at full scale but growth (make bench-growth)
#   make bench-quick   every benchmark once at a small scale: it completes and its equality checks hold
#   make lint    ruff (lint and format check), import contracts (lint-imports), mypy
#
# The virtualenv is (re)installed only when pyproject.toml changes (stamp files in .venv/), by uv
# (seconds) or, with INSTALLER=pip or where uv cannot be fetched, by pip (minutes).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
APP_STAMP := $(VENV)/.installed-app
TEST_STAMP := $(VENV)/.installed-test
PORT ?= 8501
ADDRESS ?= localhost
DEMO_LOGINS := data/demo-logins.txt
PYTEST_ARGS ?=

.PHONY: help run test bench bench-growth bench-quick lint clean-venv

help:
	@echo "make run    start ClinConsensus Studio at http://$(ADDRESS):$(PORT) (seeds a small demo on first run)"
	@echo "make test   run the whole test suite (PostgreSQL and browser tests included)"
	@echo "make bench  every benchmark at full scale but growth, on one shared build per database (~45 min)"
	@echo "make bench-growth  the growth benchmark: 1x and 4x the full scale on both databases (about an hour)"
	@echo "make bench-quick  every benchmark once at a small scale (a few minutes; checks, no timings)"
	@echo "make lint   ruff check, ruff format --check, lint-imports, mypy"

# A Debian python3 without the venv module cannot make a virtualenv; as root, fetch it.
$(BIN)/python:
	@if ! $(PYTHON) -m venv $(VENV) >/dev/null 2>&1; then \
	  rm -rf $(VENV); \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing python3-venv (needed to create $(VENV))"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq </dev/null && apt-get install -y -qq python3-venv </dev/null >/dev/null; \
	    $(PYTHON) -m venv $(VENV); \
	  else \
	    echo "cannot create $(VENV): install the venv module (Debian: apt-get install python3-venv)" >&2; \
	    exit 1; \
	  fi; \
	fi

# pip's own lines, one per package fetched and the last one, so a first install shows it is moving.
# (A pip failure still fails the pipeline; a filter that finds no line does not.)
PIP_PROGRESS := { grep --line-buffered -E '^(Collecting|Installing collected)' || true; }

# The installer: uv (from PyPI, into the virtualenv) resolves and installs the dependencies in seconds where
# pip takes minutes, and says what it does as it goes; where uv cannot be had (or with INSTALLER=pip), pip
# does the same install. Neither compiles bytecode at install time (on a busy two-core machine that was 40 s
# of 9,955 files before the server could start): the commands `make run` calls compile what they import as
# they import it, and once the server answers, `make run` compiles the rest of the virtualenv in the background
# at low priority (COMPILED_STAMP), so where a later process cannot write bytecode (PYTHONDONTWRITEBYTECODE, as
# container images often set, or a virtualenv the server's user cannot write) nothing is compiled again.
INSTALLER ?= uv
# install_into SPEC: install the project (SPEC: . or '.[test]') into the virtualenv.
define install_into
	if [ "$(INSTALLER)" = uv ] && $(BIN)/python -m pip install -q --no-compile --disable-pip-version-check uv >/dev/null 2>&1; then \
	  $(BIN)/uv pip install --python $(BIN)/python -e $(1); \
	else \
	  echo "installing with pip (the first time takes a few minutes)"; \
	  $(BIN)/python -m pip install --no-compile --progress-bar off --disable-pip-version-check -e $(1) | $(PIP_PROGRESS); \
	fi; \
	rm -f $(COMPILED_STAMP)
endef

# After the server answers: the virtualenv's and the project's bytecode, once per install, at low priority
# (cli/compile_later.py). The benchmarks compile the same first, so what they time starts as after `make run`.
COMPILED_STAMP := $(VENV)/.compiled
APP_PACKAGES := admin analysis annotate cli dashboards db demo i18n judge review ui
COMPILE_NOW := $(BIN)/python -m cli.compile_later $(VENV)/lib $(APP_PACKAGES)

$(APP_STAMP): pyproject.toml | $(BIN)/python
	@echo "installing ClinConsensus Studio and its dependencies into $(VENV)"
	@$(call install_into,.)
	@touch $@

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	@echo "installing ClinConsensus Studio with its test tools into $(VENV)"
	@$(call install_into,'.[test]')
	@touch $@ $(APP_STAMP)

run: $(APP_STAMP)
	@$(BIN)/clinconsensus migrate
	@cases=$$($(BIN)/clinconsensus status --json | $(BIN)/python -c 'import json, sys; print(json.load(sys.stdin)["cases"])'); \
	if [ "$$cases" = 0 ]; then \
	  echo "empty database: seeding the small demo"; \
	  mkdir -p $(dir $(DEMO_LOGINS)); \
	  (umask 077; $(BIN)/clinconsensus demo --scale small | tee $(DEMO_LOGINS)) || { rm -f $(DEMO_LOGINS); exit 1; }; \
	  echo "(demo logins saved in $(DEMO_LOGINS))"; \
	elif [ -f $(DEMO_LOGINS) ]; then \
	  echo "database has $$cases cases; demo logins from the first run ($(DEMO_LOGINS)):"; \
	  cat $(DEMO_LOGINS); \
	else \
	  echo "database has $$cases cases; log in with your own account (add one: clinconsensus users add NAME --role admin --password-stdin)"; \
	fi
	@echo "ClinConsensus Studio: http://$(ADDRESS):$(PORT)   (Ctrl-C stops it)"
	@if [ ! -f $(COMPILED_STAMP) ]; then \
	  nice -n 19 $(BIN)/python -m cli.compile_later --url http://$(ADDRESS):$(PORT) --stamp $(COMPILED_STAMP) $(VENV)/lib $(APP_PACKAGES) \
	    >/dev/null 2>&1 </dev/null & \
	fi
	@exec $(BIN)/clinconsensus serve --port $(PORT) --address $(ADDRESS)

# pytest exits 5 when it collected nothing; that is a failure, never a pass.
# A test stuck for 30 minutes is stopped (pytest-timeout) so the run still reports.
test: $(TEST_STAMP)
	@status=0; $(BIN)/python -m pytest --timeout=1800 $(PYTEST_ARGS) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests" >&2; fi; \
	exit $$status

# Every benchmark at full scale on one shared build per database (about 45 minutes on two cores), all but
# the growth benchmark, which has its own target. The benchmarks use the test tools: a throw-away PostgreSQL
# server (tools/), Chromium through Playwright (bench_sessions).
bench: $(TEST_STAMP)
	@$(COMPILE_NOW)
	@$(BIN)/python -m benchmarks.full

bench-growth: $(TEST_STAMP)
	@$(COMPILE_NOW)
	@$(BIN)/python -m benchmarks.bench_growth

bench-quick: $(TEST_STAMP)
	@$(COMPILE_NOW)
	@$(BIN)/python -m benchmarks.quick

# Each tool reads its settings from pyproject.toml; all four run even when one fails.
lint: $(TEST_STAMP)
	@status=0; \
	echo "== ruff check"; $(BIN)/ruff check . || status=1; \
	echo "== ruff format --check"; $(BIN)/ruff format --check . || status=1; \
	echo "== lint-imports"; $(BIN)/lint-imports || status=1; \
	echo "== mypy"; $(BIN)/mypy || status=1; \
	exit $$status

clean-venv:
	rm -rf $(VENV)
