"""The `rigscope` command: no subcommand opens the window; subcommands do the same headless.

One module per subcommand (``desktop/cli/<name>.py``, ``import_`` for `import`), each with a
``main(args) -> int``; the table below names them and they are imported only when run, so
`rigscope --version` and the GUI start do not pay for torch, sqlite or Qt they do not use.
What they share is in ``common.py``. Conventions: every command that reads or writes history
takes ``--db PATH``; every command that prints results takes ``--json``; ``args.now_s`` is
"now" for every default that depends on the date. A ``UserError`` prints its message and
exits 2. Nothing outside this package imports it: it is the top layer.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import cast

from advisor.safetext import printable
from desktop import __version__, config
from desktop.cli.common import TIME_HELP, attach_relative_times, check_db_arg, drop_stdout, interval_arg
from desktop.errors import UserError

Handler = Callable[[argparse.Namespace], int]

#: subcommand -> the module under desktop.cli that runs it (its ``main(args)``).
COMMANDS: dict[str, str] = {
    "gui": "gui",
    "doctor": "doctor",
    "sample": "sample",
    "record": "record",
    "import": "import_",
    "export": "export",
    "serve": "serve",
    "demo": "demo",
    "stress": "stress",
    "analyze": "analyze",
    "advise": "advise",
    "report": "report",
    "service": "service",
    "run": "run",
    "jobs": "jobs",
    "compare": "compare",
    "usage": "usage",
}

DEFAULT_LISTEN = "127.0.0.1:9835"


def _db(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", help="history database (default: the one in your data folder)")


def _json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate", nargs="?", const="", default=None, metavar="PROFILES",
                   help="use the simulated GPU (optionally profiles, e.g. rtx4090-laptop,rtx4090)")


def _interval(p: argparse.ArgumentParser, default: float | None = None) -> None:
    shown = f"{default:g}" if default is not None else "the sampling interval in Settings"
    low, high = config.INTERVAL_RANGE_S
    p.add_argument("--interval", type=interval_arg, default=default, metavar="S",
                   help=f"seconds between samples, {low:g} to {high:g} (default: {shown})")


def _listen(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="ADDR:PORT",
                   help=f"Prometheus listen address (default {DEFAULT_LISTEN}; 0.0.0.0:PORT for every interface)")


def _range(p: argparse.ArgumentParser, default_from: str) -> None:
    p.add_argument("--from", dest="from_", metavar="TIME", help=f"start: {TIME_HELP}; default: {default_from}")
    p.add_argument("--to", metavar="TIME", help="end, in the same forms; default: now")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rigscope",
        description="Watch, stress-test and get advice for your GPU workstation. "
        "With no command, opens the window: `rigscope [--simulate[=PROFILES]] [--db PATH]` is `rigscope gui ...`.",
    )
    parser.add_argument("--version", action="version", version=f"rigscope {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text)

    p = add("gui", "open the window (the default)")
    _simulate(p)
    _db(p)

    p = add("doctor", "check the driver, GPUs and supported metrics")
    _json(p)
    _simulate(p)

    p = add("sample", "print live readings: one line per GPU per sample, the full block, or JSON lines")
    _json(p)
    p.add_argument("--detail", action="store_true",
                   help="every metric, the host and the GPU processes as a block per sample (redrawn in a terminal)")
    _simulate(p)
    _interval(p, 1.0)
    p.add_argument("--count", type=int, default=0, metavar="N", help="stop after N samples (default: run until Ctrl+C)")

    p = add("record", "record telemetry to the history database (headless)")
    _interval(p)
    _simulate(p)
    _db(p)
    p.add_argument("--prometheus", action="store_true", help="also serve Prometheus metrics")
    _listen(p)

    p = add("import", "import nvidia-smi CSV logs into the history")
    p.add_argument("files", nargs="+", metavar="FILE", help="nvidia-smi --query-gpu=... --format=csv logs")
    p.add_argument("--machine", metavar="NAME",
                   help="for logs without uuid or pci.bus_id: the machine they come from (default: each file's name)")
    _db(p)
    _json(p)

    p = add("export", "export samples as CSV/JSON lines, or serve Prometheus metrics with --prometheus")
    _range(p, "24 h ago")
    p.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="output format (default csv)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write here instead of standard output (- is standard output too)")
    p.add_argument("--prometheus", action="store_true",
                   help="serve live metrics for Prometheus instead (the same as `rigscope serve`)")
    _listen(p)
    _interval(p)
    _simulate(p)
    _db(p)

    p = add("serve", "serve live GPU metrics for Prometheus (dcgm-exporter names) until Ctrl+C")
    _listen(p)
    _interval(p)
    _simulate(p)
    p.add_argument("--db", metavar="PATH",
                   help="history database the last stress verdict is read from (default: the one in your data folder)")

    p = add("demo", "write a simulated week into a separate demo database")
    p.add_argument("--days", type=float, default=7.0,
                   help="how many days of history to simulate, 0.01 to 366 (default 7)")
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed writes the same history")
    p.add_argument("--gpus", default="rtx4090-laptop", metavar="PROFILES",
                   help="simulated GPU profiles, comma-separated (default rtx4090-laptop)")
    p.add_argument("--db", metavar="PATH",
                   help="the demo database to write (default: demo-history.sqlite in your data folder, beside "
                        "but never in the real history; a file that holds real history is refused)")
    _json(p)

    p = add("stress", "run a sustained-load test and give a throttle verdict")
    p.add_argument("--minutes", type=float, default=None, metavar="M", help="duration (fractions allowed; default 10)")
    p.add_argument("--workload", choices=("gemm", "bandwidth", "train", "infer"), default="gemm",
                   help="what to run (default gemm)")
    p.add_argument("--dtype", choices=("bf16", "fp16", "tf32", "fp32"), default=None,
                   help="GEMM precision (default: the fastest the device supports)")
    p.add_argument("--device", default=None, metavar="DEV", help="cuda:0 | cpu | sim (default: cuda:0, else sim)")
    p.add_argument("--guard-c", type=float, default=None, metavar="C", help="stop above this GPU temperature")
    # issue 15: portable record and CI gate (desktop/cli/stress_gate.py)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="also write the run as a portable record (JSON) for `rigscope compare` or --baseline")
    p.add_argument("--price-per-hour", type=float, default=None, metavar="X",
                   help="what an hour of this machine costs (in Settings' currency): the record then has cost per work")
    p.add_argument("--baseline", metavar="FILE",
                   help="a record from an earlier `stress -o`: exit 5 when throughput falls more than "
                        "--max-drop below it")
    p.add_argument("--max-drop", type=float, default=None, metavar="PCT",
                   help="with --baseline: the drop allowed, in %% (default 5)")
    # issue 25: the Quick test once per firmware mode (desktop/cli/stress_modes.py)
    p.add_argument("--per-mode", nargs="?", const="", default=None, metavar="MODES",
                   help="run the test once in each firmware mode (comma-separated, e.g. turbo,comfort; "
                        "default: every mode the machine has) and compare them; --minutes defaults to 2")
    p.add_argument("--switch-modes", action="store_true",
                   help="with --per-mode: let Rigscope switch msi-ec / platform_profile itself (needs root); "
                        "otherwise you are asked to switch")
    _db(p)
    _json(p)

    p = add("analyze", "throttle verdict for an nvidia-smi log or a stored time range")
    p.add_argument("file", nargs="?", metavar="FILE", help="nvidia-smi CSV log (omit to use --from/--to)")
    _range(p, "1 h ago")
    p.add_argument("--gpu", type=int, default=None, metavar="INDEX",
                   help="judge only this GPU (its index in the history, or its place in the log)")
    _db(p)
    _json(p)

    p = add("advise", "recommendations from your logged history")
    p.add_argument("--days", type=float, default=7.0, help="how much history to look at (default 7)")
    _db(p)
    _json(p)

    p = add("report", "write the weekly summary as HTML, PDF, JSON or CSV")
    p.add_argument("--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (default: the last full week)")
    p.add_argument("--format", choices=("html", "pdf", "json", "csv"), default=None,
                   help="output format (default: from the file's extension, else html)")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="the file to write (week.pdf, week.html, week.json, week.csv); - for standard output")
    _db(p)

    p = add("service", "install the recorder to start at login (systemd user unit / logon task)")
    p.add_argument("action", choices=("install", "uninstall", "status"), help="what to do")
    p.add_argument("--db", metavar="PATH",
                   help="install: the history database the recorder writes (default: the one in your data folder)")
    _json(p)

    # --- run (issue 15: desktop/cli/run.py) ---
    p = add("run", "run your own job (`rigscope run -- python train.py`): its throughput, throttling, energy "
                   "and cost, with an optional thermal guard that pauses it")
    p.add_argument("--gpu", type=int, default=None, metavar="N",
                   help="the GPU the job runs on (default: the GPUs its processes use, from NVML)")
    p.add_argument("--name", default=None, metavar="NAME", help="what to call the job (default: the script's name)")
    p.add_argument("--guard-c", type=float, default=None, metavar="T",
                   help="keep the GPU at or below T °C by pausing the job (it continues 5 °C lower: setting "
                        "jobs.guard_resume_offset_c)")
    p.add_argument("-o", "--output", metavar="FILE", help="also write the job's run record (JSON) here")
    p.add_argument("--price-per-hour", type=float, default=None, metavar="X",
                   help="with -o: what an hour of this machine costs (in Settings' currency): the record then has "
                        "cost per work")
    _interval(p)
    _simulate(p)
    _db(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                   help="the command to run, after `--`; its exit code is rigscope's")

    # --- jobs (issue 15: desktop/cli/jobs.py) ---
    p = add("jobs", "list the jobs recorded by `rigscope run`, or show one job's card")
    p.add_argument("action", nargs="?", default="list", metavar="list|show",
                   help="list (the default): every job, newest first; show ID (or just ID): that job's card")
    p.add_argument("job_id", nargs="?", type=int, metavar="ID", help="the job to show (an ID from the list)")
    _db(p)
    _json(p)

    # --- compare (issue 15: desktop/cli/compare.py) ---
    p = add("compare", "compare run records (from `stress -o` / `run -o`) side by side, across machines")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="two or more record files; the first is the reference the ratios are against")
    _json(p)

    # --- usage (issue 16: desktop/cli/usage.py) ---
    p = add("usage", "GPU-hours, energy and cost per user, command or container over a period")
    _range(p, "7 days ago")
    p.add_argument("--by", choices=("user", "command", "container"), default="user",
                   help="what to total by (default user)")
    _db(p)
    _json(p)

    return parser


#: Options of `rigscope` itself (before any command); everything else belongs to a command.
_OWN_FLAGS = ("-v", "--verbose")
_OWN_EXITS = ("-h", "--help", "--version")


def with_default_command(argv: Sequence[str]) -> list[str]:
    """``rigscope``, ``rigscope --db PATH``, ``rigscope --simulate[=PROFILES]`` mean ``rigscope gui ...``:
    "gui" goes in before the first argument that is not `rigscope`'s own option, unless that is a
    command name (or something else: a mistyped command is still "invalid choice")."""
    out = list(argv)
    for i, token in enumerate(out):
        if token in _OWN_FLAGS:
            continue
        if token in _OWN_EXITS or not token.startswith("-"):
            return out
        out.insert(i, "gui")
        return out
    return [*out, "gui"]


def handler(command: str) -> Handler:
    """The ``main`` of ``command``'s module, imported now."""
    module = importlib.import_module(f"{__name__}.{COMMANDS[command]}")
    return cast(Handler, module.main)


def main(argv: Sequence[str] | None = None, *, now_s: float | None = None) -> int:
    """Run one command. ``now_s`` is "now" for every default that depends on it (the last full
    week, the last 24 h): tests pass a fixed instant so their expectations hold on any date."""
    parser = build_parser()
    given = with_default_command(attach_relative_times(argv if argv is not None else sys.argv[1:]))
    args = parser.parse_args(given)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    args.now_s = time.time() if now_s is None else now_s
    try:
        check_db_arg(args)
        return handler(args.command)(args)
    except UserError as exc:  # printable: a message may quote a lock file's pid and host, a file name, a value
        print(f"rigscope {args.command}: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `rigscope sample | head`: the reader has all it wanted
        drop_stdout()
        return 0
