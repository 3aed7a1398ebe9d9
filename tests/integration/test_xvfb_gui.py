"""The real `rigscope gui` on a real X server (Xvfb, Qt's xcb plugin): it maps, paints, and quits on SIGTERM."""

from __future__ import annotations

import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.integration.tools import require_tool

pytestmark = [pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Xvfb and xcb are Linux's")]

# Generous limits: they only bound a hang, no expected value depends on them.
_START_TIMEOUT_S = 60.0
_PAINT_TIMEOUT_S = 60.0  # bounds a failure only: a busy machine paints late


@pytest.fixture
def x_display() -> Iterator[str]:
    """A fresh Xvfb on a display number it picks itself (-displayfd), so parallel runs never collide."""
    xvfb = require_tool("Xvfb", "xvfb")
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen([xvfb, "-displayfd", str(write_fd), "-screen", "0", "1600x1000x24",
                               "-nolisten", "tcp", "-noreset"],
                              pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write_fd)
    try:
        number = b""
        deadline = time.monotonic() + 30.0
        while not number.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([read_fd], [], [], 0.5)
            if ready:
                chunk = os.read(read_fd, 16)
                if not chunk:
                    break
                number += chunk
        if not number.strip().isdigit():
            server.kill()
            _, err = server.communicate(timeout=10)
            pytest.fail(f"Xvfb did not start: {err.decode(errors='replace')[-2000:]}")
        yield f":{number.decode().strip()}"
    finally:
        os.close(read_fd)
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        if server.stderr is not None:
            server.stderr.close()


def _window_state(xwininfo: str, display: str) -> dict[str, str]:
    """xwininfo's fields for the app's top-level window ({} while there is none).

    Qt also makes a hidden 1x1 client-leader window with the same title, so the window is
    found by its WM_CLASS in the tree, not by ``-name``.
    """
    tree = subprocess.run([xwininfo, "-display", display, "-root", "-tree"],
                          capture_output=True, text=True, timeout=10, check=False).stdout
    for window_id in re.findall(r'^\s*(0x[0-9a-f]+) "Rigscope": \("[^"]*" "Rigscope"\)', tree, re.M):
        result = subprocess.run([xwininfo, "-display", display, "-id", window_id],
                                capture_output=True, text=True, timeout=10, check=False)
        if result.returncode == 0:
            return dict(re.findall(r"^\s*([A-Z][\w -]+):\s+(.+)$", result.stdout, re.M))
    return {}


def _unique_colours(identify: str, png: Path) -> int:
    out = subprocess.run([identify, "-format", "%k", str(png)], capture_output=True, text=True, timeout=30, check=True)
    return int(out.stdout.strip())


def _gpu_rows(db: Path) -> int:
    """GPU samples the window has recorded so far (0 before the first batch is committed)."""
    if not db.is_file():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
            return int(conn.execute("SELECT count(*) FROM gpu_samples").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0


def test_rigscope_gui_maps_paints_and_quits_on_sigterm_under_xvfb(x_display: str, tmp_path: Path,
                                                                  repo_root: Path) -> None:
    xwininfo = require_tool("xwininfo", "x11-utils")
    grab = require_tool("import", "imagemagick")
    identify = require_tool("identify", "imagemagick")
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM_PLUGIN_PATH")}
    env.update(DISPLAY=x_display, QT_QPA_PLATFORM="xcb", XDG_SESSION_TYPE="x11")
    db = tmp_path / "history.sqlite"
    # `python -m desktop` is the `rigscope` command, from this checkout.
    app = subprocess.Popen([sys.executable, "-m", "desktop", "gui", "--simulate", "--db", str(db)], cwd=repo_root,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        state: dict[str, str] = {}
        while app.poll() is None and time.monotonic() < deadline:
            state = _window_state(xwininfo, x_display)
            if state.get("Map State") == "IsViewable":
                break
            time.sleep(0.2)
        if app.poll() is not None:
            _out, err = app.communicate(timeout=10)
            if app.returncode == 2 and "platform plugin (xcb) cannot load" in err:
                message = f"the Qt xcb plugin's libraries are missing (`make sysdeps` installs them): {err.strip()}"
                if os.environ.get("CI"):
                    pytest.fail(message)
                pytest.skip(message)
            pytest.fail(f"rigscope gui exited with {app.returncode} before its window mapped:\n{err[-4000:]}")
        assert state.get("Map State") == "IsViewable", f"no mapped Rigscope window after {_START_TIMEOUT_S:.0f} s"
        width, height = int(state["Width"]), int(state["Height"])
        assert width >= 800 and height >= 500, state

        # The first frames follow the map: grab until the window has painted (a blank X screen
        # is one colour; the dashboard has text, cards and plots in many).
        shot = tmp_path / "rigscope-xcb.png"
        colours = 0
        deadline = time.monotonic() + _PAINT_TIMEOUT_S
        while time.monotonic() < deadline:
            subprocess.run([grab, "-display", x_display, "-window", "root", str(shot)],
                           capture_output=True, timeout=30, check=True)
            colours = _unique_colours(identify, shot)
            if colours > 64:
                break
            time.sleep(0.5)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert colours > 64, f"the screenshot {shot} is blank ({colours} colours)"

        # The recording's first batch (about 5 s in) proves the sampler fed the window; the
        # dashboard then shows cards and plots: that is the picture to keep.
        deadline = time.monotonic() + _PAINT_TIMEOUT_S
        while _gpu_rows(db) == 0 and app.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _gpu_rows(db) > 0, "no samples recorded while the window was up"
        subprocess.run([grab, "-display", x_display, "-window", "root", str(shot)],
                       capture_output=True, timeout=30, check=True)
        assert _unique_colours(identify, shot) > 64, f"the screenshot {shot} is blank"
        assert app.poll() is None, "rigscope gui died while painting"

        app.send_signal(signal.SIGTERM)
        _out, err = app.communicate(timeout=30)
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate(timeout=10)
    assert app.returncode == 0, err[-4000:]
    assert "Traceback" not in err, err[-4000:]
    assert _gpu_rows(db) > 0  # and it closed the database on the way out
