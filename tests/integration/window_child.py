"""The window as a real process for the one-database tests: `rigscope gui --simulate --db DB`, offscreen,
with the recording's closing line ("N of M samples written") logged, so the parent can count.

Usage: window_child.py DB
"""

from __future__ import annotations

import logging
import os
import sys


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("desktop.sessions.recording").setLevel(logging.INFO)  # its "history: N of M written"
    from desktop.cli import main as cli_main

    return cli_main(["gui", "--simulate", "--db", sys.argv[1]])


if __name__ == "__main__":
    sys.exit(main())
