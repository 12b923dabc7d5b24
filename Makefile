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
# LAB_LANG=zh or ru: the labs in Chinese or Russian (a new workspace; an existing one keeps its language)
LAB_LANG ?=
JUPYTER_LAB = $(PY) -m jupyter lab --no-browser --ip=$(LAB_IP) --port=$(LAB_PORT) $(if $(filter 0,$(shell id -u)),--allow-root)
# what every labkit JupyterLab gets (labkit.learner.lab.server_args: widget state saved, no news toast), as labkit lab does
LAB_SERVER_ARGS = $(shell $(PY) -c 'import shlex; from labkit.learner.lab import server_args; print(shlex.join(server_args()))')
# the workshop hub (workshop/README.md): JupyterHub from PyPI, its proxy from npm into workshop/node_modules
WORKSHOP_STAMP := $(VENV)/.labkit-workshop-installed
PROXY := workshop/node_modules/.bin/configurable-http-proxy
NOTEBOOKS := $(sort $(wildcard notebooks/0*.ipynb))
# the oldest torch the labs are tested on (labkit.learner.doctor.TESTED_RANGE; pyproject's floor): its own venv
FLOOR_VENV ?= .venv-torch-floor
TORCH_FLOOR := torch==2.4.1 torchvision==0.19.1
# The oldest transformers labkit[hf] takes, and one whose models all export on torch 2.4 (transformers 5 turns
# torch < 2.6 off; 4.51+ fall back to hooks for some there): with it the floor job runs the Hugging Face tests too.
HF_FLOOR := transformers==4.45.2
FLOOR_STAMP := $(FLOOR_VENV)/.labkit-installed

.PHONY: lab lab-reference workshop workshop-install workshop-solutions workshop-push workshop-remove-accounts workshop-loadtest workshop-board-loadtest test i18n-update i18n-build i18n-check test-torch-floor lint nbval-stress notebooks doctor bench gpu-check docs dist student-copy student-copy-solutions clean help venv

help:
	@echo "make lab        create the venv if missing, start JupyterLab on your workspace/ (blank exercises; prints the URL; LAB_LANG=zh or ru)"
	@echo "make lab-reference  start JupyterLab on notebooks/, the solved notebooks"
	@echo "make workshop   start a JupyterHub for a room on this server (workshop/README.md; TRACK=all for every section)"
	@echo "make workshop-install  (root) the learner venv of a room under /opt/labkit: learners run it, never change it"
	@echo "make workshop-solutions  hand out the solutions to every learner of the hub (their notebooks untouched)"
	@echo "make workshop-push NOTE='...'  a fixed notebooks/ into every learner's workspace, mid-workshop (edits kept)"
	@echo "make workshop-remove-accounts  (root) after the workshop: remove every learner account and its home"
	@echo "make workshop-loadtest N=8  load-test the hub: N learners run the solved core track at once (figures in build/; HTTPS=yes through Caddy)"
	@echo "make workshop-board-loadtest LEARNERS=30 HOSTILE=6  the room board under load, HOSTILE learners flooding it: latency, CPU, memory (build/)"
	@echo "make test       create the venv if missing, run every test (i18n-check first, unit, strict nbval, browser UI)"
	@echo "make i18n-update  English notebooks -> the zh/ru catalogues (notebooks/i18n/; changed cells become fuzzy)"
	@echo "make i18n-build   catalogues -> notebooks/zh/, notebooks/ru/, executed (I18N_ARGS='--lang zh --no-execute')"
	@echo "make i18n-check   fail on a missing, fuzzy, stale, off-glossary or structurally different translation"
	@echo "make test-torch-floor  unit tests and every notebook (run, outputs not compared) on the oldest tested torch"
	@echo "make lint       ruff (line length included) and mypy, as make test runs them"
	@echo "make nbval-stress  strict nbval on every notebook 3x with all cores busy, then with OMP_NUM_THREADS=1"
	@echo "make notebooks  re-execute every notebook in place, storing outputs and widget state"
	@echo "make doctor     preflight check for a lab or a workshop"
	@echo "make bench      reproduce every performance figure (BENCH_ARGS=--quick for a short run)"
	@echo "make gpu-check  on a CUDA machine: every GPU path in at most 8 minutes, table in build/gpu-check.md (GPU_CHECK_ARGS=--dry-run)"
	@echo "make docs       build the docs site (Sphinx + MyST-NB, warnings are errors) into build/site; open build/site/index.html"
	@echo "make student-copy  notebooks for students, without solutions, into build/student"
	@echo "make dist       the sdist and the wheel (it carries the labs) into dist/, for pip install dist/torch_labkit-*.whl"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# the learner edition: created from the student copy on first use, your edits are never overwritten
lab: $(STAMP)
	$(PY) -m labkit lab $(WORKSPACE) $(if $(TRACK),--track $(TRACK)) $(if $(LAB_LANG),--lang $(LAB_LANG)) --ip=$(LAB_IP) --port=$(LAB_PORT) --lab-args='$(LAB_ARGS)'

lab-reference: $(STAMP)
	@echo "Starting JupyterLab on http://$(LAB_IP):$(LAB_PORT)/lab in notebooks/, exercises solved (the token is printed below; Ctrl-C stops it)"
	$(JUPYTER_LAB) --ServerApp.root_dir=notebooks $(LAB_SERVER_ARGS) $(LAB_ARGS)

$(WORKSHOP_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install -e '.[workshop]'
	touch $(WORKSHOP_STAMP)

$(PROXY): workshop/package.json workshop/package-lock.json
	@command -v npm >/dev/null || { echo "make workshop needs Node.js and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	npm ci --prefix workshop --no-audit --no-fund
	touch $(PROXY)

# a room (the hub as root): the learner venv every learner's server runs, readable by them, writable by root only
INSTALL_IF_ROOT = $(if $(filter 0,$(shell id -u)),$(PY) -m labkit workshop install --if-stale)

workshop-install: $(WORKSHOP_STAMP)
	$(PY) -m labkit workshop install

# the hub for a room: learners sign up, you approve them; TRACK=all gives every section (default: core)
workshop: $(WORKSHOP_STAMP) $(PROXY)
	$(INSTALL_IF_ROOT)
	@echo "Workshop hub on http://$${LABKIT_WORKSHOP_IP:-127.0.0.1}:$${LABKIT_WORKSHOP_PORT:-8000}/ (Ctrl-C stops it)."
	@echo "Instructor: sign up there as '$${LABKIT_WORKSHOP_ADMIN:-instructor}' with the sign-up code the hub prints below (approved at once),"
	@echo "log in, approve learners at /hub/authorize. For a room, run this as root: each learner then runs as their own account."
	@echo "(with LABKIT_WORKSHOP_PASSWORD set: learners log in with it, you with LABKIT_WORKSHOP_ADMIN_PASSWORD)."
	@echo "See who is running and open a learner's server at /hub/admin. Read workshop/README.md first."
	@echo "With LABKIT_WORKSHOP_CADDY=yes (Debian: apt-get install caddy) the hub starts Caddy: the room is at LABKIT_WORKSHOP_SUBDOMAIN_HOST, over HTTPS."
	cd workshop && LABKIT_WORKSHOP_TRACK=$(or $(TRACK),$${LABKIT_WORKSHOP_TRACK:-core}) $(abspath $(VENV))/bin/jupyterhub -f jupyterhub_config.py

workshop-solutions: $(WORKSHOP_STAMP)
	$(PY) -m labkit workshop hand-out-solutions

# mid-workshop: the labs as notebooks/ holds them now, into every learner's workspace (labkit.workshop.push)
workshop-push: $(WORKSHOP_STAMP)
	$(PY) -m labkit workshop push --note "$(NOTE)"

# after the workshop: every learner account labkit made, with its home (asks first)
workshop-remove-accounts: $(WORKSHOP_STAMP)
	$(PY) -m labkit workshop remove-accounts

# a benchmark, not a test: the hub on loopback, N learners run the solved core track at once (workshop/README.md);
# HTTPS=yes: through Caddy over HTTPS, as a room runs (needs caddy)
workshop-loadtest: $(WORKSHOP_STAMP) $(PROXY)
	$(INSTALL_IF_ROOT)
	$(PY) -m labkit.workshop.load --learners $(or $(N),8) $(if $(filter yes,$(HTTPS)),--https) --json build/workshop-loadtest.json

# the room board under load (a benchmark): LEARNERS simulated learners post an event every few seconds,
# while HOSTILE more flood it as fast as it answers
workshop-board-loadtest: $(WORKSHOP_STAMP) $(PROXY)
	$(PY) -m labkit.workshop.board_load --learners $(or $(LEARNERS),30) --hostile $(or $(HOSTILE),0) --json build/workshop-board-loadtest.json

test: $(STAMP) i18n-check
	$(PY) -m pytest $(TEST_ARGS)

# the notebooks in Chinese and Russian (notebooks/i18n/README.md): English is the source, catalogues per notebook
i18n-update: $(STAMP)
	$(PY) -m labkit i18n update $(I18N_ARGS)
	$(PY) -m babel.messages.frontend extract -F babel.cfg --no-location --sort-output --project labkit -o labkit/locale/labkit.pot labkit
	$(PY) -m babel.messages.frontend update -i labkit/locale/labkit.pot -d labkit/locale -D labkit --ignore-obsolete
	$(PY) -m babel.messages.frontend compile -d labkit/locale -D labkit

i18n-build: $(STAMP)
	$(PY) -m labkit i18n build $(I18N_ARGS)

i18n-check: $(STAMP)
	$(PY) -m labkit i18n check $(I18N_ARGS)

# CI's second job: the tested floor in its own venv (a few GB: PyPI's torch 2.4 is a CUDA build). Strict nbval
# stays on the newest release; here each notebook must only run without an error (labkit notebooks --no-write).
# Left out: the browser and hub tests (they test JupyterLab and JupyterHub, the same on any torch), lint
# (mypy reads each torch release's own type hints) and the checkers' second run under python -O (it tests Python's
# asserts, not torch, and takes 3 minutes: the first job runs it), and every test marked torch_free (it runs no torch
# op, so its verdict is the same on any torch: the catalogues, the docs build, the workspace's files, the CLI's text).
$(FLOOR_STAMP): pyproject.toml
	test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install --upgrade pip
	printf '%s\n' $(TORCH_FLOOR) $(HF_FLOOR) > $(FLOOR_VENV)/torch-floor.txt
	$(FLOOR_VENV)/bin/python -m pip install -c $(FLOOR_VENV)/torch-floor.txt -e '.[dev]'
	touch $(FLOOR_STAMP)

test-torch-floor: $(FLOOR_STAMP)
	$(FLOOR_VENV)/bin/python -m labkit doctor
	$(FLOOR_VENV)/bin/python -m pytest -o addopts=-ra -m 'not ui and not torch_free' tests --ignore=tests/workshop \
		--ignore=tests/test_lint.py --deselect tests/core/test_checks_optimized.py::test_checker_tests_pass_under_python_O \
		$(TEST_ARGS)
	$(FLOOR_VENV)/bin/python -m labkit notebooks --no-write $(NOTEBOOKS)

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

# on a machine with a CUDA GPU (docs/instructors.md): installs nothing beyond the venv; exit 3 where there is no GPU
gpu-check: $(STAMP)
	$(PY) -m labkit gpu-check --out build $(GPU_CHECK_ARGS)

docs: $(STAMP)
	$(PY) -m labkit docs build/site

# The sdist and the wheel, as a packager builds them (python -m build: the wheel from the sdist, in an isolated
# environment that downloads [build-system] requires). Offline, DIST_ARGS=--no-isolation builds with this venv's.
dist: $(STAMP)
	$(PY) -m build --outdir dist $(DIST_ARGS) .

student-copy: $(STAMP)
	$(PY) -m labkit student-copy build/student --force $(if $(TRACK),--track $(TRACK))

student-copy-solutions: $(STAMP)
	$(PY) -m labkit student-copy build/student-solutions --with-solutions --force $(if $(TRACK),--track $(TRACK))

clean:
	rm -rf build dist .pytest_cache
