"""`rigscope menu install | uninstall`: the menu entry and icon from the installed package into a temporary XDG
tree, validated with desktop-file-validate; its Exec runs this installation, even from a path with blanks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop import menu_entry
from desktop.cli import main as cli_main
from desktop.errors import UserError
from tests.integration.tools import require_tool

pytestmark = pytest.mark.integration


def _validate(entry: Path) -> None:
    tool = require_tool("desktop-file-validate", "desktop-file-utils")
    done = subprocess.run([tool, str(entry)], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def _exec_words(entry: Path) -> list[str]:
    """The Exec line's words as a launcher reads them: the string escapes (``\\\\``) undone, then the
    quoting, which the spec defines as a subset of the shell's double quotes (so /bin/sh is the oracle)."""
    (line,) = [line for line in entry.read_text().splitlines() if line.startswith("Exec=")]
    value = line.removeprefix("Exec=").replace("\\\\", "\\").replace("%%", "%")
    done = subprocess.run(["/bin/sh", "-c", f"printf '%s\\0' {value}"], capture_output=True, timeout=30, check=True)
    return done.stdout.decode().split("\0")[:-1]


def test_cli_installs_into_the_xdg_tree_and_removes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    assert cli_main(["menu", "install"]) == 0
    files = menu_entry.MenuFiles.under(tmp_path / "share")
    assert all(path.is_file() for path in files.all())
    assert files.entry == tmp_path / "share/applications/rigscope.desktop"
    assert files.icon == tmp_path / "share/icons/hicolor/scalable/apps/rigscope.svg"
    assert str(files.entry) in capsys.readouterr().out
    _validate(files.entry)
    assert _exec_words(files.entry) == menu_entry.launch_command()
    assert cli_main(["menu", "uninstall"]) == 0
    assert not any(path.exists() for path in files.all())
    assert cli_main(["menu", "uninstall"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "Nothing was installed."


def test_the_command_runs_this_installation(tmp_path: Path) -> None:
    """A venv's or pipx's ``bin/rigscope`` beside the interpreter, else the interpreter with ``-m desktop``."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("")
    assert menu_entry.launch_command(str(venv_bin / "python")) == [str(venv_bin / "python"), "-m", "desktop"]
    (venv_bin / "rigscope").write_text("#!/bin/sh\n")
    (venv_bin / "rigscope").chmod(0o755)
    assert menu_entry.launch_command(str(venv_bin / "python")) == [str(venv_bin / "rigscope")]
    assert menu_entry.launch_command("/opt/Rigscope/rigscope", frozen=True) == ["/opt/Rigscope/rigscope"]


@pytest.mark.parametrize("folder", ["with blank", 'quote"d', "dollar$HOME", "back\\slash", "100%", "it's"])
def test_hostile_install_paths_stay_one_word(tmp_path: Path, folder: str) -> None:
    command = [str(tmp_path / folder / "bin" / "python"), "-m", "desktop"]
    _message, files = menu_entry.install(tmp_path / "share", command)
    _validate(files.entry)
    assert _exec_words(files.entry) == command


def test_a_path_with_a_line_break_is_refused_and_nothing_written(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="control character"):
        menu_entry.install(tmp_path / "share", [str(tmp_path / "a\nExec=evil" / "rigscope")])
    assert not (tmp_path / "share").exists()


def test_installed_entry_is_the_shipped_one_but_for_exec(tmp_path: Path, repo_root: Path) -> None:
    _message, files = menu_entry.install(tmp_path / "share", ["/venv/bin/rigscope"])
    shipped = (repo_root / "packaging/linux/rigscope.desktop").read_text().splitlines()
    installed = files.entry.read_text().splitlines()
    assert [line for line in installed if line not in shipped] == ["Exec=/venv/bin/rigscope",
                                                                   "TryExec=/venv/bin/rigscope"]
    assert [line for line in shipped if line not in installed] == ["Exec=rigscope"]
    assert files.icon.read_bytes() == (repo_root / "resources/rigscope.svg").read_bytes()


def test_relative_xdg_data_home_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The base directory spec: a relative $XDG_DATA_HOME is invalid and ignored."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", "share")
    assert menu_entry.data_home() == tmp_path / ".local" / "share"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG menus are Linux's")
def test_entry_opens_when_run_from_its_exec(tmp_path: Path) -> None:
    """The installed Exec, run as a launcher would, reaches rigscope (its --version, to need no display)."""
    _message, files = menu_entry.install(tmp_path / "share")
    words = _exec_words(files.entry)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([*words, "--version"], capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 0 and done.stdout.startswith("rigscope "), done.stdout + done.stderr
