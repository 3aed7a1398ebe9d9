"""`rigscope menu install | uninstall`: Rigscope in the desktop's application menu, from the installed package."""

from __future__ import annotations

import argparse
import sys

HELP = "add Rigscope to (or remove it from) your desktop's application menu (Linux: XDG data folder)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("install", "uninstall"), help="what to do")


def main(args: argparse.Namespace) -> int:
    from desktop import menu_entry

    if sys.platform.startswith("win"):  # a Start-menu shortcut is the installer's job there (docs/windows.md)
        from desktop.errors import UserError

        raise UserError("the menu entry is for Linux desktops (freedesktop.org); on Windows see docs/windows.md")
    message, _files = menu_entry.install() if args.action == "install" else menu_entry.uninstall()
    print(message)
    return 0
