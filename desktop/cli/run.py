"""`rigscope run [--gpu N] [--name NAME] [--guard-c C] [-o FILE [--price-per-hour X]] -- CMD ARGS…`: a job, watched.

Rigscope's exit code is the job's (128 + N when it died of signal N); 2 is a usage error found
before the job started. SIGINT, SIGTERM and SIGHUP go to the job, which decides what to do with
them. Everything rigscope says goes to standard error, prefixed ``rigscope run:``; the job's own
output passes through untouched. The card (duration, GPU busy share, VRAM, throttling, energy,
cost) is printed on standard error at the end and stored with the job in the history. ``-o`` also
writes the portable run record (`rigscope compare`), with ``--price-per-hour`` the machine's price.

The sequence (history, sampler, guard, the wrapped job, the card, the record) is desktop/sessions/job.py's
``JobSession``; this command reads the options, prints what it says and forwards signals to the job.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from desktop.cli.common import (
    add_db,
    add_interval,
    add_simulate,
    check_output,
    db_path,
    load_settings,
    open_backend,
    sampling_interval,
)
from desktop.config import JobSettings
from desktop.errors import UserError
from desktop.jobs.wrap import FORWARDED

if TYPE_CHECKING:
    from desktop.jobs.job import JobRun


def _say(message: str) -> None:
    print(f"rigscope run: {message}", file=sys.stderr, flush=True)


def _command(args: argparse.Namespace) -> list[str]:
    argv = list(args.cmd or [])
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UserError("what should it run? Put the command after `--`: rigscope run -- python train.py")
    return argv


def _own_std_streams() -> None:
    """A standard stream closed at the start (`2>&-`) gets /dev/null under its number: else the next file
    rigscope opens (a pipe to the job, the database) would take that number, and what is meant for it (the
    card, the job's output) would land there. Messages and the card then go to the terminal, or nowhere."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: ``fd``, since the ones below are open
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if fd == 1:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - rigscope's own stdout for its whole life
        elif fd == 2:
            sys.stderr = _terminal_or_nothing()


def _terminal_or_nothing() -> Any:
    """Where messages go when standard error is closed: the controlling terminal, else /dev/null; never stdout
    (``print(file=None)``, which a closed stderr's ``sys.stderr`` is, writes to standard output)."""
    try:
        return open("/dev/tty", "w", encoding="utf-8", errors="backslashreplace")
    except OSError:
        return open(os.devnull, "w")


HELP = ("run your own job (`rigscope run -- python train.py`): its throughput, throttling, energy and cost, "
        "with an optional thermal guard that pauses it")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", type=int, default=None, metavar="N",
                        help="the GPU the job runs on (default: the GPUs its processes use, from NVML)")
    parser.add_argument("--name", default=None, metavar="NAME",
                        help="what to call the job (default: the script's name)")
    parser.add_argument("--guard-c", type=float, default=None, metavar="T",
                        help="keep the GPU at or below T °C by pausing the job (it continues "
                             f"{JobSettings().guard_resume_offset_c:g} °C lower: setting jobs.guard_resume_offset_c)")
    parser.add_argument("-o", "--output", metavar="FILE", help="also write the job's run record (JSON) here")
    parser.add_argument("--price-per-hour", type=float, default=None, metavar="X",
                        help="with -o: what an hour of this machine costs (in Settings' currency): the record then "
                             "has cost per work")
    add_interval(parser)
    add_simulate(parser)
    add_db(parser)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                        help="the command to run, after `--`; its exit code is rigscope's")


def main(args: argparse.Namespace) -> int:
    from desktop.sessions.job import JobSession

    if os.name == "posix":
        _own_std_streams()
    argv = _command(args)
    settings, _problems = load_settings()
    interval_s = sampling_interval(args, settings)
    output = Path(args.output) if args.output else None
    if output is not None:
        check_output(output, "job.json")
    price = _price(args)
    session = JobSession(argv, open_backend(args.simulate), db_path(args), settings, name=args.name,
                         gpu_index=args.gpu, guard_c=args.guard_c, interval_s=interval_s, output=output,
                         price_per_hour=price, chose_simulated=args.simulate is not None, say=_say, show_card=_show)
    return session.run(on_started=_forward_signals)


def _show(card: str) -> None:
    print(card, file=sys.stderr, flush=True)


def _forward_signals(run: JobRun) -> Callable[[], None]:
    """While the job runs, SIGINT, SIGTERM and SIGHUP go to it, and Ctrl+Z stops it with rigscope; what is
    returned puts rigscope's handlers back."""
    def handler(signum: int, frame: FrameType | None) -> None:
        run.forward(signum)

    previous = {sig: signal.signal(sig, handler) for sig in FORWARDED}
    tstp = getattr(signal, "SIGTSTP", None)
    if tstp is not None:
        def suspend(signum: int, frame: FrameType | None) -> None:
            _suspend_with_job(run, tstp, suspend)

        previous[tstp] = signal.signal(tstp, suspend)
    return lambda: _restore(previous)


def _suspend_with_job(run: JobRun, tstp: int, handler: Any) -> None:
    """Ctrl+Z: the job is in a session of its own, out of the terminal's reach, so rigscope stops it, then itself;
    ``fg`` (SIGCONT) wakes rigscope here, and it continues the job unless the guard holds it paused."""
    run.hold(True)
    signal.signal(tstp, signal.SIG_DFL)
    try:
        os.kill(os.getpid(), tstp)  # stopped here until SIGCONT (ignored by the kernel in an orphaned group)
    finally:
        signal.signal(tstp, handler)
        run.hold(False)


def _restore(previous: dict[int, Any]) -> None:
    for sig, old in previous.items():
        signal.signal(sig, old)


def _price(args: argparse.Namespace) -> float | None:
    """``--price-per-hour``, checked before the job starts (UserError: exit 2)."""
    price: float | None = getattr(args, "price_per_hour", None)
    if price is None:
        return None
    if not (math.isfinite(price) and price >= 0):
        raise UserError(f"--price-per-hour must be a price of zero or more, not {price:g}")
    if not args.output:
        raise UserError("--price-per-hour goes into the run record: add -o FILE")
    return price
