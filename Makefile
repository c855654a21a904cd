# rasp-lab: `make demo` runs the main job, `make test` runs the test suite.
# Both create the virtual environment (.venv) and install the package on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: demo results predictions replication test install install-test chromium bench clean

# the main job's packages only (make demo / results / predictions); the test extras
# (TransformerLens, Tracr, IPython, pytest) only for make test
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch is pinned to the local CPU build (2.13.0) so no CUDA packages are downloaded.
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

demo: install
	$(VENV)/bin/rasp demo

# docs/results.md is generated, never edited by hand: the demo's runs plus the confirmation task
# (`rasp demo --full`; finished runs reused), claims computed from them, the command at the top
results: install
	$(VENV)/bin/rasp demo --full --results docs/results.md

# docs/predictions.md is generated, never edited by hand: per-PE predictions with program
# searches, the check against our own training (runs reused) and the RASP-L conjecture alone
# (about 40 minutes on 2 cores: 2,164 s at load ~2 on 2026-11-28 with the validation runs
# reused; ~2 hours when they train; `python -m analysis.reporting.predictions_doc --help` for the settings)
predictions: install
	$(PY) -m analysis.reporting.predictions_doc -o docs/predictions.md --validate-tasks sort_unique,count --validate-seeds 7

# docs/huang-replication.md is generated from the cell files of `rasp replicate huang`
# (docs/replication/<scale>/<task>--<pe>.json; finished runs under runs/huang are reused): the
# cells of Huang et al.'s experiment this 2-core machine affords at their scale, and the CPU cut
# (--scale small) of four tasks. The other cells are GPU work: the doc lists their commands.
REPLICATION_FULL ?= majority_binary
REPLICATION_SMALL ?= majority_binary majority sort_150 copy_unique_150 tomita4_nextchar dyck1_depth2_nextchar tomita7_nextchar ends_02_nextchar
replication: install
	$(VENV)/bin/rasp replicate huang $(REPLICATION_FULL) --pe ape_learned,nope -o docs/replication
	$(VENV)/bin/rasp replicate huang $(REPLICATION_SMALL) --pe ape_learned,nope --scale small -o docs/replication
	$(PY) -m analysis.reporting.replication_doc --cells docs/replication -o docs/huang-replication.md

# The report tests open pages in headless Chromium: `make test` installs Debian's package
# `chromium` when no Chromium is on PATH (as root, or with password-less sudo), else stops
# with the command to run.
CHROMIUM_NAMES ?= chromium chromium-browser
CHROMIUM_HINT := sudo apt-get update && sudo apt-get install -y chromium
APT_LOG ?= /tmp/rasp-lab-chromium-install.log

chromium:
	@for n in $(CHROMIUM_NAMES); do command -v $$n >/dev/null 2>&1 && exit 0; done; \
	echo "make: Chromium is missing (the report tests need it); installing Debian's package 'chromium'"; \
	if ! command -v apt-get >/dev/null 2>&1; then \
	  echo "make: no apt-get here; install Chromium with your package manager (Debian: $(CHROMIUM_HINT))" >&2; exit 1; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	else echo "make: cannot install Chromium without root; run: $(CHROMIUM_HINT)" >&2; exit 1; fi; \
	echo "make: apt output goes to $(APT_LOG)"; \
	{ $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } > $(APT_LOG) 2>&1 \
	  || { tail -n 20 $(APT_LOG) >&2; echo "make: installing Chromium failed; run: $(CHROMIUM_HINT)" >&2; exit 1; }; \
	echo "make: Chromium installed"

test: install-test chromium
	# stdin from /dev/null: no test may wait on a terminal
	$(PY) -m pytest -q --timeout=900 < /dev/null

bench: install-test
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
