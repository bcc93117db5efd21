# Each target installs what it needs into .venv first; `make test` and `make book` work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# What the HTML book serves itself (MathJax), from the npm registry at the versions tools/site pins.
SITE_ASSETS := tools/site/node_modules/.package-lock.json
export PATH := $(abspath $(BIN)):$(PATH)
# book_lib's figure functions check what they draw (book_lib.legible): no text under 9 px, no overlap.
export BOOK_LIB_CHECK_FIGURES := 1
# Matplotlib's font cache lives in the venv whose fonts it lists: a cache in the user's home, written by
# a venv since deleted (another clone's), lists font files that are gone, and every figure then warns on
# stderr, which nbval counts as a changed output.
export MPLCONFIGDIR := $(abspath $(VENV))/.mplconfig
NOTEBOOKS := chapters solutions
PYTEST_NB := --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=300
# The oldest jax the notebooks support: pyproject.toml's floor, the one place it is written. `make test`
# runs the chapters on it too, as a one-chip TPU runtime runs them: its devices mixed (book_lib.devices)
# and its matmuls rounded to bf16 (book_lib.precision; the solutions are checked so in the main run).
FLOOR_JAX := $(shell sed -n 's/.*"jax>=\([0-9.]*\)".*/\1/p' pyproject.toml)
FLOOR := .venv-floor
FLOOR_STAMP := $(FLOOR)/.installed-$(FLOOR_JAX)
# The TPU compiler, libtpu (requirements-tpu.lock): installed by `make tpu` and `make test` only.
TPU_STAMP := $(VENV)/.installed-libtpu
# The tests run on this machine's CPU: with libtpu installed and no TPU, JAX would otherwise start a TPU
# backend in every process and log its failure to find one. `book_lib.tpu_aot` compiles for a described
# TPU all the same.
CPU_ONLY := JAX_PLATFORMS=cpu

.PHONY: help install tpu floor devices sandbox browser postgres unit test book check-site exercises course collect grade chapters sync bench lint clean

help:
	@echo "make book       build the HTML book into _build/html/"
	@echo "make check-site build the book and check every page in headless Chromium, offline"
	@echo "make unit       the fast tests of tests/pure and tests/jax: start here (under a minute)"
	@echo "make tpu        every program of the book compiled by libtpu for five TPU slices, with no TPU (tests/tpu)"
	@echo "make test       every tier (pure, jax, tpu, course, site), the notebooks (nbval), chapters at the jax floor"
	@echo "make floor      run the chapters on the oldest jax pyproject.toml allows (.venv-floor)"
	@echo "make devices    run the chapters on 1, 2, 4 and 16 CPU devices (a reader's own XLA_FLAGS count)"
	@echo "make exercises  regenerate exercises/release/ and solutions/ from exercises/source/"
	@echo "make course DIR=path [SEED=n] [ROSTER=students.csv] [ASSIGNMENTS=\"ch01_rooflines ...\"] [RESEED=1] [DB=postgresql://...]"
	@echo "               a class's nbgrader course folder, or more assignments and students in one (SEED: the"
	@echo "               class's own numbers; ROSTER: each student's own, in DIR/handout/<id>/; default: every assignment)"
	@echo "               [DUE=2026-12-01T23:59+01:00 (the named assignments') LATE=none|zero|10%/day (a new course's)]"
	@echo "make collect DIR=path ASSIGNMENT=name (ZIP=download.zip | FROM=folder)  hand-ins into DIR/submitted/"
	@echo "make grade DIR=path ASSIGNMENT=name [JOBS=n | SCHEDULER=tcp://host:8786]  autograde every submission"
	@echo "make chapters   re-execute the chapter notebooks in place (commit them with their outputs)"
	@echo "make sync       rewrite every setup cell and Colab link, and the module map's pages and tables"
	@echo "make bench      time each notebook, each test tier and the whole suite"

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

$(TPU_STAMP): $(STAMP) requirements-tpu.lock
	$(BIN)/python -m pip install -q --no-deps -r requirements-tpu.lock
	touch $@

tpu: $(TPU_STAMP)
	$(CPU_ONLY) $(BIN)/pytest -n 2 --dist loadscope -p no:nbval -p no:cacheprovider tests/tpu

$(FLOOR_STAMP): requirements.lock requirements-tpu-floor.lock pyproject.toml
	rm -rf $(FLOOR)
	$(PYTHON) -m venv $(FLOOR)
	sed -e 's/^jax==.*/jax==$(FLOOR_JAX)/' -e 's/^jaxlib==.*/jaxlib==$(FLOOR_JAX)/' requirements.lock > $(FLOOR)/requirements.txt
	$(FLOOR)/bin/python -m pip install -q -r $(FLOOR)/requirements.txt
	$(FLOOR)/bin/python -m pip install -q --no-deps -r requirements-tpu-floor.lock
	$(FLOOR)/bin/python -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Executed, not compared (nbval-lax): JAX's printed words differ between versions; the cells' own checks run.
floor: $(FLOOR_STAMP)
	$(CPU_ONLY) MPLCONFIGDIR=$(abspath $(FLOOR))/.mplconfig BOOK_LIB_EMULATE_ONE_CHIP=1 BOOK_LIB_MATMUL_PRECISION=bf16 \
	  $(FLOOR)/bin/pytest -n 2 --dist loadscope \
	  -p no:cacheprovider chapters \
	  --nbval-lax --nbval-cell-timeout=300

$(SITE_ASSETS): tools/site/package.json tools/site/package-lock.json
	npm ci --prefix tools/site --no-audit --no-fund --loglevel=error

# Autograding runs each submission under bubblewrap (Debian's package); installed here when we can.
sandbox:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1; } || \
	  echo "bubblewrap is not installed: grading refuses to run (or set sandbox='none'; README, Grading)"

# Debian's Chromium drives the site check (tests/site/test_book.py, `make check-site`); installed here when we can.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
	  echo "chromium is not installed: the site check fails until it is (apt-get install chromium)"

# A gradebook on PostgreSQL (`make course DB=...`): the tests start a throwaway server of Debian's package.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && apt-get install -y -qq postgresql) >/dev/null 2>&1; } || \
	  echo "postgresql is not installed: the distributed grading tests fail until it is (apt-get install postgresql)"

# A reader's own device count is kept (book_lib.devices): each chapter runs, or skips a cell with
# `%%needs_devices N` and says so. Not part of `make test` (four more runs of every chapter).
devices: $(STAMP)
	for n in 1 2 4 16; do \
	  $(CPU_ONLY) XLA_FLAGS=--xla_force_host_platform_device_count=$$n $(BIN)/pytest -q -n 2 --dist loadscope \
	    -p no:cacheprovider chapters --nbval-lax --nbval-cell-timeout=300 || exit 1; \
	done

unit: $(STAMP)
	$(CPU_ONLY) $(BIN)/pytest -n 2 --dist loadfile -p no:nbval -m "not slow" tests/pure tests/jax

# The tests' folders (courses and their SQLite gradebooks, the built book) go to memory where the
# machine has a tmpfs: nbgrader commits once per cell, and a commit there costs no wait on the disk.
TEST_TMP := $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo $${TMPDIR:-/tmp})

test: $(STAMP) $(TPU_STAMP) $(FLOOR_STAMP) $(SITE_ASSETS) sandbox browser postgres lint
	@base=$$(mktemp -d "$(TEST_TMP)/book-tests.XXXXXX"); \
	$(CPU_ONLY) $(BIN)/pytest -n 2 --dist loadscope --no-loadscope-reorder --basetemp="$$base" tests $(NOTEBOOKS) $(PYTEST_NB); \
	status=$$?; rm -rf "$$base"; exit $$status
	$(MAKE) --no-print-directory floor

book: $(STAMP) $(SITE_ASSETS)
	$(BIN)/jupyter-book build . -W -n --keep-going --all
	@echo "Open $(abspath _build/html/index.html)"

check-site: book browser
	$(BIN)/python tools/check_site.py _build/html --screenshots _build/site-check

exercises: $(STAMP)
	$(CPU_ONLY) $(BIN)/python exercises/build.py

course: $(STAMP)
	@test -n "$(DIR)" || { echo "usage: make course DIR=path/to/class [SEED=number] [ROSTER=students.csv] [ASSIGNMENTS=\"a b\"] [RESEED=1] [DB=postgresql://USER@HOST/NAME]"; exit 2; }
	$(BIN)/python exercises/build.py --course "$(DIR)" $(if $(SEED),--seed $(SEED)) $(if $(ROSTER),--roster "$(ROSTER)") $(if $(RESEED),--reseed) $(if $(DUE),--due "$(DUE)") $(if $(LATE),--late "$(LATE)") $(if $(DB),--db "$(DB)") $(ASSIGNMENTS)

collect: $(STAMP)
	@test -n "$(DIR)" && test -n "$(ASSIGNMENT)" && test -n "$(ZIP)$(FROM)" || { echo "usage: make collect DIR=path/to/class ASSIGNMENT=name (ZIP=download.zip | FROM=folder)"; exit 2; }
	$(BIN)/python -m exercises.collect "$(DIR)" "$(ASSIGNMENT)" $(if $(ZIP),--zip "$(ZIP)",--from "$(FROM)")

grade: $(STAMP) sandbox
	@test -n "$(DIR)" && test -n "$(ASSIGNMENT)" || { echo "usage: make grade DIR=path/to/class ASSIGNMENT=name [JOBS=n | SCHEDULER=tcp://HOST:8786]"; exit 2; }
	$(BIN)/python -m exercises.grade "$(DIR)" "$(ASSIGNMENT)" $(if $(SCHEDULER),--scheduler "$(SCHEDULER)",--jobs $(or $(JOBS),1))

chapters: $(STAMP)
	$(CPU_ONLY) $(BIN)/python tools/notebooks.py execute

sync: $(STAMP)
	$(BIN)/python tools/notebooks.py sync
	$(BIN)/python tools/module_map.py

bench: $(STAMP)
	$(CPU_ONLY) $(BIN)/python benchmarks/run.py

lint: $(STAMP)
	$(BIN)/ruff check book_lib tests exercises benchmarks tools
	$(BIN)/ruff format --check book_lib tests exercises benchmarks tools
	$(BIN)/mypy book_lib

clean:
	rm -rf _build .pytest_cache
