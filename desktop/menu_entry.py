"""Rigscope in the desktop's application menu (`rigscope menu install | uninstall`), from the installed package.

The desktop entry, the icon and the AppStream metainfo ship as package data (``packaging/linux``,
``resources/rigscope.svg``); ``install`` copies them into the user's XDG data folder
(``$XDG_DATA_HOME``, default ``~/.local/share``): ``applications/rigscope.desktop`` with its
``Exec`` naming this installation's command (a pipx venv's ``bin`` is rarely on the desktop
session's PATH), ``icons/hicolor/scalable/apps/rigscope.svg`` and ``metainfo/``. ``uninstall``
removes exactly those files. Menus (freedesktop.org menu spec) watch the applications folder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop.errors import UserError
from desktop.paths import packaging_path, resource_path

ENTRY_NAME = "rigscope.desktop"
METAINFO_NAME = "io.github.rigscope.Rigscope.metainfo.xml"
ICON_NAME = "rigscope.svg"


def data_home() -> Path:
    """``$XDG_DATA_HOME`` when set to an absolute path (the spec ignores a relative one), else ~/.local/share."""
    value = os.environ.get("XDG_DATA_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".local" / "share"


@dataclass(frozen=True)
class MenuFiles:
    """Where the three files go under one data folder."""

    entry: Path
    icon: Path
    metainfo: Path

    @classmethod
    def under(cls, base: Path) -> MenuFiles:
        return cls(base / "applications" / ENTRY_NAME, base / "icons" / "hicolor" / "scalable" / "apps" / ICON_NAME,
                   base / "metainfo" / METAINFO_NAME)

    def all(self) -> tuple[Path, Path, Path]:
        return (self.entry, self.icon, self.metainfo)


def launch_command(executable: str | None = None, frozen: bool | None = None) -> list[str]:
    """The command that opens this installation's window: the ``rigscope`` script beside the interpreter
    (venv, pipx), the bundle itself (PyInstaller), else the interpreter running the package."""
    frozen = getattr(sys, "frozen", False) if frozen is None else frozen
    exe = executable or sys.executable
    if frozen:
        return [exe]
    script = Path(exe).with_name("rigscope")
    return [str(script)] if script.is_file() and os.access(script, os.X_OK) else [exe, "-m", "desktop"]


#: Characters the desktop entry spec reserves in an Exec argument: such an argument is quoted.
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def exec_value(command: Sequence[str]) -> str:
    """``command`` as a desktop entry's ``Exec=`` value (spec: quoting inside double quotes escapes ``"`$\\``,
    and the string value's own escaping doubles each backslash again; ``%`` is ``%%``); UserError for what
    a desktop entry cannot carry (control characters: a line break would start a new key)."""
    words = []
    for word in command:
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in word):
            raise UserError(f"cannot add Rigscope to the menu: the path {word!a} contains a control character, "
                            "which a desktop entry cannot carry; install Rigscope under a path without it")
        text = word.replace("%", "%%")
        if any(c in _RESERVED for c in text) or text == "":
            text = '"' + "".join("\\" + c if c in '"`$\\' else c for c in text) + '"'
        words.append(text.replace("\\", "\\\\"))
    return " ".join(words)


def render_entry(command: Sequence[str]) -> str:
    """The shipped desktop entry with its ``Exec`` (and ``TryExec``) running ``command``."""
    lines = packaging_path(f"linux/{ENTRY_NAME}").read_text(encoding="utf-8").splitlines()
    out = []
    for line in lines:
        if line.startswith("Exec="):
            out.append(f"Exec={exec_value(command)}")
            if len(command) == 1:  # menus hide the entry once the program is gone (an uninstalled venv)
                out.append(f"TryExec={exec_value(command)}")
        elif not line.startswith("TryExec="):
            out.append(line)
    return "\n".join(out) + "\n"


def install(base: Path | None = None, command: Sequence[str] | None = None) -> tuple[str, MenuFiles]:
    """Write the entry, icon and metainfo under ``base`` (default: the XDG data folder); the message and where."""
    files = MenuFiles.under(base if base is not None else data_home())
    entry = render_entry(command if command is not None else launch_command())
    sources = {files.icon: resource_path(ICON_NAME), files.metainfo: packaging_path(f"linux/{METAINFO_NAME}")}
    try:
        contents = {files.entry: entry.encode("utf-8"), **{dest: src.read_bytes() for dest, src in sources.items()}}
    except OSError as exc:
        raise UserError(f"cannot read Rigscope's shipped menu files ({exc.filename}): reinstall Rigscope") from exc
    for path, data in contents.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(data)
            tmp.replace(path)  # a menu watching the folder never reads half a file
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return f"Added Rigscope to the application menu: {files.entry} (icon {files.icon}).", files


def uninstall(base: Path | None = None) -> tuple[str, MenuFiles]:
    """Remove what ``install`` wrote under ``base``; the message and where."""
    files = MenuFiles.under(base if base is not None else data_home())
    removed = 0
    for path in files.all():
        try:
            if path.exists():
                path.unlink()
                removed += 1
        except OSError as exc:
            raise UserError(f"cannot remove {path}: {exc.strerror or exc}") from exc
    message = f"Removed Rigscope from the application menu ({files.entry})." if removed else "Nothing was installed."
    return message, files
