"""`rigscope gui` says which Debian packages Qt's xcb plugin lacks (exit 2) instead of letting Qt abort."""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.cli import gui
from desktop.errors import UserError
from desktop.ui import platform_check
from desktop.ui.platform_check import (
    DEBIAN_PACKAGES,
    install_hint,
    missing_libraries,
    read_dynamic,
    xcb_expected,
    xcb_plugin_candidates,
    xcb_problem,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the xcb plugin is Linux's")
# Loaded by every process already; never a reason for the plugin to fail.
_BASE_LIBRARIES = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
                   "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-aarch64.so.1"}


@pytest.mark.parametrize(("env", "platform", "expected"), [
    ({"DISPLAY": ":0"}, "linux", True),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": ""}, "linux", True),  # `make run` empties it
    ({"QT_QPA_PLATFORM": "xcb"}, "linux", True),
    ({"QT_QPA_PLATFORM": "xcb:nograb", "DISPLAY": ":1"}, "linux", True),
    ({"QT_QPA_PLATFORM": "xcb;wayland"}, "linux", True),
    ({"QT_QPA_PLATFORM": "wayland;xcb", "DISPLAY": ":0"}, "linux", False),
    ({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, "linux", False),
    ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
    ({"DISPLAY": ":0", "XDG_SESSION_TYPE": "wayland"}, "linux", False),
    ({}, "linux", False),  # no display at all: Qt's own message is the right one
    ({"QT_QPA_PLATFORM": "xcb", "DISPLAY": ":0"}, "win32", False),
    ({"DISPLAY": ":0"}, "darwin", False),
])
def test_the_check_runs_only_where_qt_would_pick_xcb(env, platform, expected):
    assert xcb_expected(env, platform) is expected


def test_missing_libraries_become_one_line_with_the_apt_get_command():
    message = xcb_problem({"DISPLAY": ":0"}, platform="linux",
                          find_missing=lambda: ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    assert message is not None
    assert "\n" not in message
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1 are missing" in message
    assert "`sudo apt-get install libxcb-icccm4 libxcb-keysyms1`" in message


def test_nothing_missing_or_no_xcb_means_no_message():
    assert xcb_problem({"DISPLAY": ":0"}, platform="linux", find_missing=list) is None

    def boom() -> list[str]:
        raise AssertionError("must not look at libraries when the platform is not xcb")

    assert xcb_problem({"QT_QPA_PLATFORM": "offscreen"}, platform="linux", find_missing=boom) is None


def test_an_unknown_library_is_named_and_packages_are_listed_once():
    text = install_hint(["libglib-2.0.so.0", "libgthread-2.0.so.0", "libweird.so.3"])
    assert "`sudo apt-get install libglib2.0-0`" in text
    assert "a package that provides libweird.so.3" in text
    assert install_hint(["libweird.so.3"]).endswith("Install the package that provides libweird.so.3.")


def test_an_unreadable_plugin_leaves_the_word_to_qt():
    def unreadable() -> list[str]:
        raise ValueError("not an ELF file")

    assert xcb_problem({"QT_QPA_PLATFORM": "xcb"}, platform="linux", find_missing=unreadable) is None


@linux_only
def test_the_wheels_xcb_plugin_is_read_as_the_loader_reads_it():
    plugin = xcb_plugin_candidates({})[0]
    needed, runpath = read_dynamic(plugin)
    assert {"libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libQt6XcbQpa.so.6"} <= set(needed)
    assert runpath == ["$ORIGIN/../../lib"]


@pytest.mark.parametrize("content", [b"", b"not an ELF file", b"\x7fELF\x02\x01"])
def test_a_file_that_is_no_shared_library_is_refused_not_crashed_on(tmp_path, content):
    plugin = tmp_path / "libqxcb.so"
    plugin.write_bytes(content)
    with pytest.raises((ValueError, struct.error)):
        read_dynamic(plugin)
    assert xcb_problem({"QT_QPA_PLATFORM": "xcb"}, platform="linux",
                       find_missing=lambda: missing_libraries(plugin)) is None


@linux_only
def test_qts_own_libraries_are_followed_and_only_system_libraries_are_tried():
    plugin = xcb_plugin_candidates({})[0]
    tried: list[str] = []

    def load(name: str) -> str | None:
        tried.append(name)
        return name if name == "libxcb-icccm.so.4" else None

    assert missing_libraries(plugin, load) == ["libxcb-icccm.so.4"]
    assert not [name for name in tried if name.startswith("libQt6") or name.startswith("libicu")]
    # Reached only through libQt6Gui / libQt6DBus: the walk goes through Qt's libraries.
    assert {"libEGL.so.1", "libfontconfig.so.1", "libdbus-1.so.3"} <= set(tried)
    assert len(tried) == len(set(tried))


def test_a_dependency_that_is_missing_is_reported_by_its_own_name(monkeypatch):
    class FakeCDLL:
        def __init__(self, name: str) -> None:
            raise OSError("libxcb-util.so.1: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(platform_check.ctypes, "CDLL", FakeCDLL)
    assert platform_check.dlopen_missing("libxcb-image.so.0") == "libxcb-util.so.1"


@linux_only
def test_every_library_the_plugin_needs_has_a_package_and_the_makefile_installs_it(repo_root: Path):
    plugin = xcb_plugin_candidates({})[0]
    system = [name for name in missing_libraries(plugin, lambda name: name) if name not in _BASE_LIBRARIES]
    assert "libxcb-icccm.so.4" in system
    unmapped = [name for name in system if name not in DEBIAN_PACKAGES]
    assert not unmapped, f"add these to DEBIAN_PACKAGES in desktop/ui/platform_check.py: {unmapped}"
    makefile = (repo_root / "Makefile").read_text()

    def listed(variable: str) -> set[str]:
        found = re.search(rf"^{variable}\s*:=((?:.*\\\n)*.*)$", makefile, re.M)
        assert found, f"{variable} is not in the Makefile"
        return set(found.group(1).replace("\\\n", " ").split())

    installed = listed("XCB_PACKAGES") | listed("DEB_PACKAGES")
    # zlib and libzstd are required on every Debian system; without glib PySide6 cannot even be
    # imported (the Makefile says why it leaves it out).
    needed = {DEBIAN_PACKAGES[name] for name in system} - {"zlib1g", "libzstd1", "libglib2.0-0"}
    assert needed <= installed, f"the Makefile's XCB_PACKAGES lacks {sorted(needed - installed)}"


def test_gui_stops_with_the_message_before_opening_a_gpu_or_a_window(tmp_path, monkeypatch):
    monkeypatch.setenv("QT_QPA_PLATFORM", "xcb")
    monkeypatch.setenv("DISPLAY", ":987")  # a display, so the check for one passes
    monkeypatch.setattr(platform_check, "xcb_plugin_candidates", lambda env: [Path("libqxcb.so")])
    monkeypatch.setattr(platform_check, "missing_libraries", lambda plugin: ["libxcb-cursor.so.0"])

    def no_backend(_simulate: object) -> None:
        raise AssertionError("opened the GPU before checking the platform")

    monkeypatch.setattr(gui, "open_backend", no_backend)
    with pytest.raises(UserError, match=r"apt-get install libxcb-cursor0") as raised:
        gui.main(argparse.Namespace(simulate="", db=str(tmp_path / "h.sqlite")))
    assert raised.value.exit_code == 2
    assert not (tmp_path / "h.sqlite").exists()


# The real `rigscope gui` in a child process: the real plugin, the real ELF walk, the CLI's exit
# code; only dlopen is told that one library is absent. Without the check Qt aborts (134).
_CHILD = """
import sys
from desktop.ui import platform_check
real = platform_check.dlopen_missing
platform_check.dlopen_missing = lambda name: name if name == "libxcb-icccm.so.4" else real(name)
from desktop.cli import main
raise SystemExit(main(["gui", "--simulate", "--db", sys.argv[1]]))
"""


@linux_only
def test_rigscope_gui_exits_2_naming_the_packages_instead_of_qts_abort(tmp_path, repo_root):
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM_PLUGIN_PATH")}
    env.update(QT_QPA_PLATFORM="xcb", DISPLAY=":987")  # no X server there: Qt would abort either way
    result = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "h.sqlite")], cwd=repo_root, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rigscope gui: Qt's X11 platform plugin (xcb) cannot load: libxcb-icccm.so.4")
    assert "libxcb-icccm4" in lines[0]
