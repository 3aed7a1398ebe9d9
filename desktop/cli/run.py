"""`rigscope run [--gpu N] [--name NAME] [--guard-c C] [-o FILE [--price-per-hour X]] -- CMD ARGS…`: a job, watched.

Rigscope's exit code is the job's (128 + N when it died of signal N); 2 is a usage error found
before the job started. SIGINT, SIGTERM and SIGHUP go to the job, which decides what to do with
them. Everything rigscope says goes to standard error, prefixed ``rigscope run:``; the job's own
output passes through untouched. The card (duration, GPU busy share, VRAM, throttling, energy,
cost) is printed on standard error at the end and stored with the job in the history. ``-o`` also
writes the portable run record (`rigscope compare`), with ``--price-per-hour`` the machine's price.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from advisor.safetext import printable
from desktop import config
from desktop.cli.common import check_interval, check_output, db_path, load_settings, open_backend
from desktop.errors import UserError
from desktop.jobs.guard import GuardSettings, check_guard_c
from desktop.jobs.job import JobHistory, JobRun
from desktop.jobs.wrap import FORWARDED
from desktop.telemetry.sampler import Sampler, open_host_backend


def _say(message: str) -> None:
    print(f"rigscope run: {message}", file=sys.stderr, flush=True)


def _command(args: argparse.Namespace) -> list[str]:
    argv = list(args.cmd or [])
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UserError("what should it run? Put the command after `--`: rigscope run -- python train.py")
    return argv


def _guard(args: argparse.Namespace, settings: config.Settings, sampler: Sampler) -> GuardSettings | None:
    if args.guard_c is None:
        return None
    devices = sampler.gpu.devices()
    watched = [d for d in devices if args.gpu is None or d.index == args.gpu]
    jobs = settings.jobs
    check_guard_c(args.guard_c, watched, _temperatures(sampler, {d.index for d in watched}),
                  resume_offset_c=jobs.guard_resume_offset_c)
    return GuardSettings(args.guard_c, resume_offset_c=jobs.guard_resume_offset_c, min_pause_s=jobs.guard_min_pause_s,
                         min_run_s=jobs.guard_min_run_s)


def _temperatures(sampler: Sampler, indices: set[int]) -> dict[int, float]:
    """The watched GPUs' temperatures now (those that can be read), for the guard's check before the job starts."""
    import time

    try:
        readings = sampler.gpu.sample(time.time())
    except Exception:  # a GPU that cannot be read now: the guard's other checks still hold
        return {}
    return {r.info.index: float(r.sample.temperature_c) for r in readings
            if r.info.index in indices and r.sample is not None and r.sample.temperature_c is not None}


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


def main(args: argparse.Namespace) -> int:
    if os.name == "posix":
        _own_std_streams()
    argv = _command(args)
    settings, _problems = load_settings()
    interval_s = args.interval if args.interval is not None else settings.sampling.interval_s
    check_interval(interval_s)
    output = Path(args.output) if args.output else None
    if output is not None:
        check_output(output, "job.json")
    price = _price(args)
    backend = open_backend(args.simulate)
    try:
        if args.gpu is not None and args.gpu not in {d.index for d in backend.devices()}:
            known = ", ".join(str(d.index) for d in backend.devices()) or "none"
            raise UserError(f"--gpu {args.gpu}: there is no such GPU here (GPUs: {known})")
        if backend.source.simulated and args.simulate is None:
            _say(f"no NVIDIA GPU here ({backend.source.fallback_reason}); watching the simulated GPU")
        history = JobHistory(db_path(args))
        history.open()
        if history.other_writer:
            _say("the recorder writes the history: its samples are the job's telemetry")
        host = open_host_backend() if history.writer is not None else None
        sampler = Sampler(backend, host, process_period_s=max(interval_s, settings.sampling.process_interval_s))
        guard = _guard(args, settings, sampler)
    except BaseException:
        backend.close()
        raise
    fd, progress_name = tempfile.mkstemp(prefix="rigscope-progress-", suffix=".jsonl")
    os.close(fd)
    progress = Path(progress_name)
    run = JobRun(argv, sampler, name=args.name, history=history, gpu_index=args.gpu, guard=guard,
                 interval_s=interval_s, process_period_s=settings.sampling.process_interval_s,
                 progress_path=progress, say=_say)
    previous: dict[int, Any] = {}
    try:
        try:
            run.start()
        except OSError as exc:  # not found, not executable: said like a shell says it
            raise UserError(f"cannot run {printable(argv[0])!r}: {exc.strerror or exc}") from None
        previous = _forward_signals(run)
        code = run.run()
        _restore(previous)
        previous = {}
        _conclude(run, settings, history, output, price)
        return code
    finally:
        _restore(previous)
        history.close()
        sampler.close()
        progress.unlink(missing_ok=True)


def _forward_signals(run: JobRun) -> dict[int, Any]:
    def handler(signum: int, frame: FrameType | None) -> None:
        run.forward(signum)

    previous = {sig: signal.signal(sig, handler) for sig in FORWARDED}
    tstp = getattr(signal, "SIGTSTP", None)
    if tstp is not None:
        def suspend(signum: int, frame: FrameType | None) -> None:
            _suspend_with_job(run, tstp, suspend)

        previous[tstp] = signal.signal(tstp, suspend)
    return previous


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


def _conclude(run: JobRun, settings: config.Settings, history: JobHistory, output: Path | None,
              price_per_hour: float | None = None) -> None:
    """The verdict, the card (printed, stored with the job) and the run record for -o."""
    series, _unit = run.series()
    verdict = run.verdict()
    sentence = str(verdict.get("sentence", "")) if verdict else None
    throttled = verdict.get("throttled") if verdict else None
    card_dict: dict[str, Any] | None = None
    try:
        history.flush()
        card = _card(run, settings, history, series, sentence,
                     throttled=throttled if isinstance(throttled, bool) else None)
        note = run.guard_note()
        if note is not None:
            card = replace(card, notes=(*card.notes, note))
        card_dict = card.as_dict()
        from desktop.jobs.card import format_card

        print(("\n" if run.line_open[2] else "") + format_card(card), file=sys.stderr, flush=True)
    except Exception as exc:  # the job is done: a card that cannot be made is said, not fatal
        _say(f"no job card ({' '.join(str(exc).split()) or type(exc).__name__})")
        if sentence:
            _say(sentence)
    run.record = replace(run.record, card=card_dict)
    run.store_end(series)
    if output is not None:
        _write_output(run, output, card_dict, price_per_hour, settings.costs.currency)


def _card(run: JobRun, settings: config.Settings, history: JobHistory, series: Any, verdict: str | None, *,
          throttled: bool | None = None) -> Any:
    """The job's one card: what it prints, stores (`rigscope jobs show`, the Jobs page) and writes with -o.

    From the history's samples over the job; where the history has none of the job's GPU (the recorder
    writes it and watches another GPU), from the samples the run took itself."""
    from desktop.advice import load_cloud_offers, load_gpu_specs
    from desktop.history.store import HistoryStore
    from desktop.jobs.card import build_card, job_frame, job_gpus
    from desktop.jobs.envelope_note import with_envelope_note
    from desktop.jobs.trace_frame import has_samples, trace_frame

    now = run.record.ended_s or run.clock()

    def make(store: HistoryStore) -> Any:
        frame = job_frame(store, run.record, now)
        if not has_samples(job_gpus(run.record, frame), run.record.started_s, now):
            arrays = {index: run.trace.arrays(index) for index in run.trace.columns}
            time_s = next(iter(arrays.values()))[0] if arrays else None
            if time_s is not None:
                own = trace_frame(run.infos, time_s, {i: cols for i, (_t, cols) in arrays.items()},
                                  start_s=frame.start_s, end_s=frame.end_s)
                frame = replace(frame, gpus=own.gpus, processes=None)  # the history's processes are another GPU's
        card = build_card(run.record, series, frame, settings.costs, offers=load_cloud_offers(),
                          specs=load_gpu_specs(), verdict=verdict, now_s=now, throttled=throttled,
                          thresholds=settings.advisor)
        if run.record.source == "simulated":
            card = replace(card, notes=(*card.notes, SIMULATED_LOAD_NOTE))
        return with_envelope_note(card, store, run.record, now)  # the laptop's power envelope over the job

    return history.do(make)


#: On the simulated GPU the job is the load: it runs the GPU at full load while it runs, whatever it does (a
#: `sleep 8` read 100 % busy and "1 s at 13x" in the cloud), so its GPU figures describe the simulation.
SIMULATED_LOAD_NOTE = ("Simulated GPU: it ran at full load while the job ran, whatever the job did; the GPU busy "
                       "share, throttling and cloud times describe the simulation, not the job.")


def _write_output(run: JobRun, output: Path, card: dict[str, Any] | None, price_per_hour: float | None = None,
                  currency: str | None = None) -> None:
    from desktop.stress.portable import record_from_job, write_record

    index = run.primary_gpu()
    time_s, columns = run.trace.arrays(index) if index is not None else (None, None)
    try:
        record = record_from_job(run.record, card, time_s=time_s, columns=columns,
                                 gpu=run.infos.get(index) if index is not None else None,
                                 price_per_hour=price_per_hour, currency=currency, pauses=run.pauses)
        write_record(output, record)
    except (OSError, ValueError) as exc:
        _say(f"could not write {printable(output)}: {exc}")
