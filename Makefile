# labkit: the two commands a user needs are `make lab` and `make test`.
# Both create the virtual environment on first use (only Python 3.10+ and make needed).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.labkit-installed
LAB_PORT ?= 8888
LAB_IP ?= 127.0.0.1
WORKSPACE ?= workspace
# TRACK=core: the workshop's core track (sections tagged extra left out); TRACK=all: every section
TRACK ?=
JUPYTER_LAB = $(PY) -m jupyter lab --no-browser --ip=$(LAB_IP) --port=$(LAB_PORT) $(if $(filter 0,$(shell id -u)),--allow-root)
NOTEBOOKS := $(sort $(wildcard notebooks/0*.ipynb))

.PHONY: lab lab-reference test lint nbval-stress notebooks doctor bench docs student-copy student-copy-solutions clean help venv

help:
	@echo "make lab        create the venv if missing, start JupyterLab on your workspace/ (blank exercises; prints the URL)"
	@echo "make lab-reference  start JupyterLab on notebooks/, the solved notebooks"
	@echo "make test       create the venv if missing, run every test (unit, strict nbval, browser UI)"
	@echo "make lint       ruff (line length included) and mypy, as make test runs them"
	@echo "make nbval-stress  strict nbval on every notebook 3x with all cores busy, then with OMP_NUM_THREADS=1"
	@echo "make notebooks  re-execute every notebook in place, storing outputs and widget state"
	@echo "make doctor     preflight check for a lab or a workshop"
	@echo "make bench      reproduce every performance figure (BENCH_ARGS=--quick for a short run)"
	@echo "make docs       build the docs site (Sphinx + MyST-NB, warnings are errors) into build/site; open build/site/index.html"
	@echo "make student-copy  notebooks for students, without solutions, into build/student"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# the learner edition: created from the student copy on first use, your edits are never overwritten
lab: $(STAMP)
	$(PY) -m labkit workspace $(WORKSPACE) $(if $(TRACK),--track $(TRACK))
	@echo "Starting JupyterLab on http://$(LAB_IP):$(LAB_PORT)/lab in $(WORKSPACE)/ (the token is printed below; Ctrl-C stops it)"
	$(JUPYTER_LAB) --ServerApp.root_dir=$(WORKSPACE) $(LAB_ARGS)

lab-reference: $(STAMP)
	@echo "Starting JupyterLab on http://$(LAB_IP):$(LAB_PORT)/lab in notebooks/, exercises solved (the token is printed below; Ctrl-C stops it)"
	$(JUPYTER_LAB) --ServerApp.root_dir=notebooks $(LAB_ARGS)

test: $(STAMP)
	$(PY) -m pytest $(TEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check labkit tests conftest.py
	$(PY) -m mypy

nbval-stress: $(STAMP)
	$(PY) -m labkit nbval-stress

notebooks: $(STAMP)
	$(PY) -m labkit notebooks $(NOTEBOOKS)

doctor: $(STAMP)
	$(PY) -m labkit doctor

bench: $(STAMP)
	$(PY) -m labkit bench --json build/bench.json $(BENCH_ARGS)

docs: $(STAMP)
	$(PY) -m labkit docs build/site

student-copy: $(STAMP)
	$(PY) -m labkit student-copy build/student --force $(if $(TRACK),--track $(TRACK))

student-copy-solutions: $(STAMP)
	$(PY) -m labkit student-copy build/student-solutions --with-solutions --force

clean:
	rm -rf build .pytest_cache
