# Rigscope: `make run` sets everything up and starts the app; `make test` sets everything
# up and runs the whole test suite. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of PyTorch lies on these machines' disks; on a workstation with an
# NVIDIA GPU, `make run TORCH_SPEC=torch` lets pip choose the CUDA build instead.
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed
# Debian packages the integration tests use (a real Prometheus server, packaging
# validators, PDF rendering, a virtual X screen).
DEB_PACKAGES := prometheus desktop-file-utils appstream systemd poppler-utils xvfb xauth \
                libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3
export QT_QPA_PLATFORM ?= offscreen

.PHONY: run test bench lint sysdeps screenshots demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Rigscope needs Python 3.11 or newer")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test,stress]"
	touch $(STAMP)

run: $(STAMP)
	QT_QPA_PLATFORM= $(BIN)/rigscope

# Installs the Debian packages the integration tests need when they are missing and
# apt-get can be used (CI runs as root); elsewhere those tests say what to install.
sysdeps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "note: missing Debian packages:$$missing (integration tests that need them will be skipped)"; fi; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check desktop advisor tests
	$(BIN)/mypy desktop advisor
	$(BIN)/lint-imports

test: $(STAMP) sysdeps lint
	$(BIN)/python -m pytest -q tests --ignore=tests/bench

bench: $(STAMP)
	$(BIN)/python -m pytest -q tests/bench -p no:randomly --benchmark-enable -s

# The window's pages from the running app on the demo week, and the Stress page during and
# after a simulated one-click Sustained test (its pytest-qt test, on an accelerated clock).
screenshots: $(STAMP)
	$(BIN)/python -m desktop.ui.screenshots resources/screenshots
	RIGSCOPE_SCREENSHOTS=resources/screenshots $(BIN)/python -m pytest -q \
	  tests/unit/ui/test_stress_page.py -k one_click_sustained

demo: $(STAMP)
	$(BIN)/rigscope demo

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
