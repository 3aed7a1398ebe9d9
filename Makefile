# Rigscope: `make run` installs the app (with PyTorch for the stress test) and starts it;
# `make test` adds the test tool chain and runs the whole test suite. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of PyTorch lies on these machines' disks; on a workstation with an
# NVIDIA GPU, `make run TORCH_SPEC=torch` lets pip choose the CUDA build instead.
TORCH_SPEC ?= torch==2.13.0
# Two stamps: the app and its stress extra (`make run`), then the test tool chain on top
# (`make test`, `lint`, `bench`, `screenshots`): a user who only runs the app never waits for
# pytest, mypy, ruff, gpustat or nvitop.
STAMP      := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# pip >= 24 shows the build backend's warnings; for an editable install of a layout that maps
# resources/ to desktop.resources, setuptools always adds an "Editable installation" notice
# (its InformationOnly class: "be careful with folders named like your package"), which says
# nothing about this project. Only that notice is silenced; any other warning still shows.
EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e
# Debian packages Qt needs to open a window on X11: the PySide6 wheel's xcb platform plugin
# (libqxcb.so) loads these, and a fresh Debian/Ubuntu lacks several (libxcb-icccm4,
# libxcb-keysyms1, libxcb-cursor0, ...). desktop/ui/platform_check.py maps each library to its
# package; tests/unit/ui/test_platform_check.py keeps this list in step with the wheel.
# (libglib2.0-0 is left out: PySide6 cannot even be imported without it, and on Ubuntu 24.04
# it is a virtual package that `dpkg -s` never finds.)
XCB_PACKAGES := libxcb1 libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 \
                libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-util1 \
                libxcb-xfixes0 libxcb-xkb1 libxkbcommon0 libxkbcommon-x11-0 libx11-6 libx11-xcb1 \
                libegl1 libgl1 libfontconfig1 libfreetype6 libdbus-1-3
# Debian packages the integration tests use (a real Prometheus server, packaging
# validators, PDF rendering, a virtual X screen with a window on it and a screenshot of it).
DEB_PACKAGES := prometheus openssl desktop-file-utils appstream systemd poppler-utils xvfb xauth \
                x11-utils imagemagick $(XCB_PACKAGES)
export QT_QPA_PLATFORM ?= offscreen

.PHONY: run test bench lint sysdeps xcb-deps device-check screenshots demo clean

# Installs the Debian packages in $(1) that are missing, where apt-get can be used (CI runs
# as root); elsewhere prints the apt-get command and $(2). Nothing to do off Debian/Ubuntu.
define install_debs
	@command -v dpkg >/dev/null 2>&1 || exit 0; \
	missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "note: missing Debian packages:$$missing ($(2)); install them with: sudo apt-get install$$missing"; fi; \
	fi
endef

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and "Rigscope needs Python 3.11 or newer")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(EDITABLE) ".[stress]"
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(EDITABLE) ".[test,stress]"
	touch $(TEST_STAMP)

run: $(STAMP) xcb-deps
	QT_QPA_PLATFORM= $(BIN)/rigscope

# The libraries Qt's X11 plugin needs for the window (without them `rigscope gui` says which
# packages to install and exits 2).
xcb-deps:
	$(call install_debs,$(XCB_PACKAGES),the window cannot open on X11 without them)

# The Debian packages the integration tests need; where they cannot be installed, those
# tests say what to install (and are skipped; in CI, where $CI is set, they fail).
sysdeps:
	$(call install_debs,$(DEB_PACKAGES),integration tests that need them will be skipped)

lint: $(TEST_STAMP)
	$(BIN)/ruff check desktop advisor tests tools
	$(BIN)/mypy desktop advisor
	$(BIN)/lint-imports

# The oldest NVML binding pyproject.toml declares (nvidia-ml-py>=12.535; 12.535.77 is the first
# 12.535 on PyPI): its pure-Python pynvml.py goes into an ignored folder, and the NVML tests run a
# second time with it first on PYTHONPATH (about 15 s). The stand-ins in tests/fakes/ hold their own
# ids and structs (nvml_abi.py), so what changes in that run is the binding the app calls through.
NVML_FLOOR     ?= 12.535.77
NVML_FLOOR_DIR := .nvml-floor/$(NVML_FLOOR)

$(NVML_FLOOR_DIR)/pynvml.py: | $(TEST_STAMP)
	$(BIN)/python -m pip install --quiet --no-deps --only-binary=:all: --target $(NVML_FLOOR_DIR) \
	  "nvidia-ml-py==$(NVML_FLOOR)"

test: $(TEST_STAMP) sysdeps lint $(NVML_FLOOR_DIR)/pynvml.py
	$(BIN)/python -m pytest -q tests --ignore=tests/bench
	RIGSCOPE_EXPECT_PYNVML=$(NVML_FLOOR) PYTHONPATH=$(NVML_FLOOR_DIR) \
	  $(BIN)/python -m pytest -q tests/unit/telemetry

bench: $(TEST_STAMP)
	$(BIN)/python -m pytest -q tests/bench -p no:randomly --benchmark-enable -s

# The window's pages from the running app on the demo week (tools/screenshots.py), the Compare
# dialog on two simulated runs (tools/compare_shot.py), and the Stress page during and after a
# simulated one-click Sustained test (its pytest-qt test, on an accelerated clock).
screenshots: $(TEST_STAMP)
	$(BIN)/python -m tools.screenshots resources/screenshots
	$(BIN)/python -m tools.compare_shot resources/screenshots
	RIGSCOPE_SCREENSHOTS=resources/screenshots $(BIN)/python -m pytest -q \
	  tests/unit/ui/test_stress_page.py -k one_click_sustained

# On a machine with an NVIDIA GPU, in under 8 minutes: doctor, 30 s of samples and a 1-minute
# stress test of each workload with samples taken during it, saved under $(OUT)/<gpu> (default a
# fresh temp dir; copy the folder to tests/fixtures/real/ to have the NVML stand-in replay it). Runs under the machine's own python3 (numpy, psutil,
# nvidia-ml-py and a CUDA torch there): no venv, no network. The pure-Python packages it may lack
# come from `python3 tools/fetch_wheels.py`, run beforehand where there is network (.device-deps/).
# Exit 2, saying why, where there is no GPU or a module is missing.
DEVICE_PYTHON ?= python3
OUT ?= $(shell mktemp -d "$${TMPDIR:-/tmp}/rigscope-device-check-XXXXXX")
device-check:
	$(DEVICE_PYTHON) tools/device_check.py --out "$(OUT)"

demo: $(STAMP)
	$(BIN)/rigscope demo

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .nvml-floor
