"""No display (SSH, a headless server): bare `rigscope` and `rigscope gui` say so in one line and exit 2.

Qt aborted there: exit 134 after seven lines about platform plugins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.cli import COMMANDS
from desktop.ui.platform_check import needs_display

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland displays are Linux's")
@pytest.mark.parametrize("argv", [[], ["gui"], ["--simulate"], ["gui", "--simulate=h100"]])
def test_no_display_is_one_line_and_exit_2(argv: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env |= {"PYTHONPATH": str(REPO), "RIGSCOPE_DATA_DIR": str(tmp_path / "data"),
            "RIGSCOPE_CONFIG_DIR": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-m", "desktop", *argv], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("rigscope gui: the window needs a display")
    # names every command that works without one, from the parser's table
    assert line.split("without one: ")[1].split(" (")[0].split(", ") == [
        name for name in COMMANDS if name not in ("gui", "menu")]
    assert not (tmp_path / "data").exists()  # nothing started, nothing written


@pytest.mark.parametrize(("env", "expected"), [
    ({}, True),
    ({"QT_QPA_PLATFORM": "xcb"}, True),
    ({"QT_QPA_PLATFORM": "wayland;xcb"}, True),
    ({"DISPLAY": ":0"}, False),
    ({"WAYLAND_DISPLAY": "wayland-0"}, False),
    ({"QT_QPA_PLATFORM": "offscreen"}, False),
    ({"QT_QPA_PLATFORM": "vnc:size=1600x1000"}, False),
    ({"QT_QPA_PLATFORM": "xcb;offscreen"}, False),  # Qt falls back to the next one
])
def test_needs_display(env: dict[str, str], expected: bool) -> None:
    assert needs_display(env, platform="linux") is expected


def test_other_platforms_have_their_own_display() -> None:
    assert not needs_display({}, platform="win32")
    assert not needs_display({}, platform="darwin")
