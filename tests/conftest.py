"""Test-wide setup: offscreen Qt, private config/data folders, no leaked threads."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own config and data folders: nothing touches the user's."""
    base = tmp_path_factory.mktemp("rigscope-home")
    monkeypatch.setenv("RIGSCOPE_CONFIG_DIR", str(base / "config"))
    monkeypatch.setenv("RIGSCOPE_DATA_DIR", str(base / "data"))
    monkeypatch.setenv("RIGSCOPE_STATE_DIR", str(base / "state"))
    # The simulated loads processes share (desktop/telemetry/simulated/shared.py): each test its own machine.
    monkeypatch.setenv("RIGSCOPE_RUNTIME_DIR", str(base / "run"))
    # An empty sysfs: a real GPU of this machine that the driver put to sleep must not show up in
    # tests of the NVML backend (their fake bus ids are common real ones, 0000:01:00.0).
    monkeypatch.setenv("RIGSCOPE_SYSFS_ROOT", str(base / "sys"))


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a Python thread running (QThreads are checked in tests/unit/ui)."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    for thread in leaked:
        thread.join(timeout=2.0)
    still = [t.name for t in leaked if t.is_alive()]
    assert not still, f"test left threads running: {still}"


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
