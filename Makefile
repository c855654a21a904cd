# rasp-lab: `make demo` runs the main job, `make test` runs the test suite.
# Both create the virtual environment (.venv) and install the package on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip

.PHONY: demo test install bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch is pinned to the local CPU build (2.13.0) so no CUDA packages are downloaded.
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/rasp demo

test: install
	# stdin from /dev/null: no test may wait on a terminal
	$(PY) -m pytest -q --timeout=900 < /dev/null

bench: install
	$(PY) -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
