"""`rigscope service install [--db PATH] | uninstall | status [--json]`: the recorder at login."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from advisor.safetext import printable
from desktop import service
from desktop.cli.common import add_db, add_json, db_path
from desktop.paths import default_db_path
from desktop.service import ServiceStatus

HELP = "install the recorder to start at login (systemd user unit / logon task)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("install", "uninstall", "status"), help="what to do")
    add_db(parser, "install: the history database the recorder writes (default: the one in your data folder)")
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    if args.action == "status":
        state = service.status()
        print(json.dumps(asdict(state), indent=2) if args.json else _describe(state))
        return 0
    # A change refused is a UserError (exit 2); one written but not in effect is PartlyDone (exit 8).
    result = service.install(db_path=db_path(args)) if args.action == "install" else service.uninstall()
    if args.json:
        print(json.dumps({"message": result.message, "status": asdict(result.status)}, indent=2))
    else:
        print(result.message)
    return 0


def _describe(state: ServiceStatus) -> str:
    def word(flag: bool | None, yes: str, no: str) -> str:
        return "unknown" if flag is None else (yes if flag else no)

    lines = [
        f"{'installed' if state.installed else 'not installed'} ({state.manager}: {state.location})",
        f"starts at login: {word(state.enabled, 'yes', 'no')}",
        f"running: {word(state.active, 'yes', 'no')}",
        f"command: {subprocess.list2cmdline(state.command)}",
    ]
    if state.installed:
        db = service.recorded_db(state.command)
        lines.append(f"history database: {db if db is not None else f'the default ({default_db_path()})'}")
        gpu = gpu_line(Path(db) if db is not None else default_db_path())
        if gpu is not None:
            lines.append(gpu)
    if state.detail:
        lines.append(f"note: {state.detail}")
    return "\n".join(lines)


def gpu_line(db: Path) -> str | None:
    """"GPU: not recorded since …" while the recorder last said no GPU could be read (its ``gpu_unavailable``
    event, not followed by ``gpu_available``); None when it records the GPU, or the history cannot say."""
    from desktop.history.store import HistoryStore

    try:
        with HistoryStore.open(db, readonly=True) as store:
            events = store.events(0.0, math.inf, ["gpu_unavailable", "gpu_available"])
    except Exception:  # no history yet, or one that cannot be read: the status says nothing about the GPU
        return None
    if not events or events[-1].kind != "gpu_unavailable":
        return None
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(events[-1].time_s))
    reason = printable(events[-1].detail.rstrip(". "))
    return f"GPU: not recorded since {since} (the host only): {reason}; the recorder tries NVML again every minute"
