"""The `rigscope` command: no subcommand opens the window; subcommands do the same headless.

Every subcommand's implementation is imported lazily (``module:function``), so
`rigscope --version` and the GUI start do not pay for torch, sqlite or Qt they do not use.
Conventions: every command that reads or writes history takes ``--db PATH``; every command
that prints results takes ``--json``. A ``UserError`` prints its message and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import cast

from desktop import __version__
from desktop.errors import UserError

Handler = Callable[[argparse.Namespace], int]


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", help="history database (default: the one in your data folder)")


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate", nargs="?", const="", default=None, metavar="PROFILES",
                   help="use the simulated GPU (optionally profiles, e.g. rtx4090-laptop,rtx4090)")


def _interval(p: argparse.ArgumentParser, default: float | None = None) -> None:
    p.add_argument("--interval", type=float, default=default, metavar="S", help="seconds between samples")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rigscope",
        description="Watch, stress-test and get advice for your GPU workstation. "
        "With no command, opens the window.",
    )
    parser.add_argument("--version", action="version", version=f"rigscope {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, target: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(target=target)
        return p

    p = add("gui", "desktop.ui.app:main", "open the window (the default)")
    _simulate(p)
    _db(p)

    p = add("doctor", "desktop.telemetry.doctor:main", "check the driver, GPUs and supported metrics")
    _json(p)
    _simulate(p)

    p = add("sample", "desktop.telemetry.live:main", "print live readings as a table or JSON lines")
    _json(p)
    _simulate(p)
    _interval(p, 1.0)
    p.add_argument("--count", type=int, default=0, metavar="N", help="stop after N samples (default: run until Ctrl+C)")

    p = add("record", "desktop.recorder:main", "record telemetry to the history database (headless)")
    _interval(p)
    _simulate(p)
    _db(p)
    p.add_argument("--prometheus", action="store_true", help="also serve Prometheus metrics")
    p.add_argument("--listen", default="127.0.0.1:9835", metavar="ADDR:PORT",
                   help="Prometheus listen address (default 127.0.0.1:9835)")

    p = add("import", "desktop.history.commands:import_main", "import nvidia-smi CSV logs into the history")
    p.add_argument("files", nargs="+", metavar="FILE")
    _db(p)
    _json(p)

    p = add("export", "desktop.history.commands:export_main",
            "export samples as CSV/JSON lines, or serve Prometheus metrics with --prometheus")
    p.add_argument("--from", dest="from_", metavar="TIME", help="start (ISO date/time or -7d); default: 24 h ago")
    p.add_argument("--to", metavar="TIME", help="end (ISO date/time); default: now")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    p.add_argument("--prometheus", action="store_true", help="serve live metrics for Prometheus instead")
    p.add_argument("--listen", default="127.0.0.1:9835", metavar="ADDR:PORT",
                   help="Prometheus listen address (default 127.0.0.1:9835)")
    _interval(p)
    _simulate(p)
    _db(p)

    p = add("demo", "desktop.history.commands:demo_main", "write a simulated week into a separate demo database")
    p.add_argument("--days", type=float, default=7.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gpus", default="rtx4090-laptop", metavar="PROFILES", help="simulated GPU profiles")
    _db(p)
    _json(p)

    p = add("stress", "desktop.stress.commands:stress_main", "run a sustained-load test and give a throttle verdict")
    p.add_argument("--minutes", type=float, default=None, metavar="M", help="duration (fractions allowed; default 10)")
    p.add_argument("--workload", choices=("gemm", "bandwidth", "train", "infer"), default="gemm")
    p.add_argument("--dtype", choices=("bf16", "fp16", "tf32", "fp32"), default=None,
                   help="GEMM precision (default: the fastest the device supports)")
    p.add_argument("--device", default=None, metavar="DEV", help="cuda:0 | cpu | sim (default: cuda:0, else sim)")
    p.add_argument("--guard-c", type=float, default=None, metavar="C", help="stop above this GPU temperature")
    _db(p)
    _json(p)

    p = add("analyze", "desktop.stress.commands:analyze_main",
            "throttle verdict for an nvidia-smi log or a stored time range")
    p.add_argument("file", nargs="?", metavar="FILE", help="nvidia-smi CSV log (omit to use --from/--to)")
    p.add_argument("--from", dest="from_", metavar="TIME")
    p.add_argument("--to", metavar="TIME")
    p.add_argument("--gpu", type=int, default=None, metavar="INDEX")
    _db(p)
    _json(p)

    p = add("advise", "desktop.advice:advise_main", "recommendations from your logged history")
    p.add_argument("--days", type=float, default=7.0, help="how much history to look at (default 7)")
    _db(p)
    _json(p)

    p = add("report", "desktop.ui.reports:main", "write the weekly summary as HTML, PDF, JSON or CSV")
    p.add_argument("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (default: the last full week)")
    p.add_argument("--format", choices=("html", "pdf", "json", "csv"), default="html")
    p.add_argument("-o", "--output", metavar="FILE", required=True)
    _db(p)

    p = add("service", "desktop.service:main",
            "install the recorder to start at login (systemd user unit / logon task)")
    p.add_argument("action", choices=("install", "uninstall", "status"))
    _json(p)
    return parser


def _resolve(target: str) -> Handler:
    module_name, _, func = target.partition(":")
    module = importlib.import_module(module_name)
    return cast(Handler, getattr(module, func))


def _attach_relative_times(argv: Sequence[str]) -> list[str]:
    """``--from -7d`` -> ``--from=-7d``: argparse would take ``-7d`` for an option."""
    out: list[str] = []
    for token in argv:
        if out and out[-1] in ("--from", "--to") and len(token) > 1 and token[0] == "-" and token[1].isdigit():
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def main(argv: Sequence[str] | None = None, *, now_s: float | None = None) -> int:
    """Run one command. ``now_s`` is "now" for every default that depends on it (the last full
    week, the last 24 h): tests pass a fixed instant so their expectations hold on any date."""
    parser = build_parser()
    argv = _attach_relative_times(argv if argv is not None else sys.argv[1:])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        args = parser.parse_args(["gui", *(argv if argv is not None else sys.argv[1:])])
    args.now_s = time.time() if now_s is None else now_s
    handler = _resolve(args.target)
    try:
        return handler(args)
    except UserError as exc:
        print(f"rigscope {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rigscope sample | head`
        return 0
