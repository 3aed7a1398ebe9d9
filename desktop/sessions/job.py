"""Your own job (`rigscope run -- CMD`): the whole sequence from the command to its exit code, in one place.

``JobSession`` checks the GPU asked for, opens the job's history (its own writer when it gets the lock,
else beside the recorder, else a private one: desktop/jobs/job_history.py's ``JobHistory``), builds the sampler
and the thermal guard's settings (refusing a guard the GPUs are already above), runs the wrapped job
(``JobRun``: the wrapper, watchdog, progress and guard), then makes the card, stores it with the job,
writes the portable run record (``output``) and hands back the job's exit code. What it has to say goes
to ``say`` and the card to ``show_card``: desktop/cli/run.py prints both on standard error and forwards
signals to the job while it runs.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.guard import GuardRefused, GuardSettings, check_guard_c
from advisor.safetext import printable
from desktop import config
from desktop.errors import UserError
from desktop.jobs.job import JobRun
from desktop.jobs.job_history import JobHistory
from desktop.jobs.job_writes import END_WRITES_S
from desktop.telemetry.sampler import Sampler, open_host_backend

if TYPE_CHECKING:
    from advisor.frame import HistoryFrame
    from advisor.job_card import JobCard
    from advisor.progress import JobSeries
    from desktop.config import CostSettings
    from desktop.history.store import HistoryStore
    from desktop.jobs.model import JobRecord

log = logging.getLogger(__name__)

#: On the simulated GPU the job is the load: it runs the GPU at full load while it runs, whatever it does (a
#: `sleep 8` read 100 % busy and "1 s at 13x" in the cloud), so its GPU figures describe the simulation.
SIMULATED_LOAD_NOTE = ("Simulated GPU: it ran at full load while the job ran, whatever the job did; the GPU busy "
                       "share, throttling and cloud times describe the simulation, not the job.")

#: ``on_started(run)`` is called once the job runs; what it returns is called when the job has ended (before the
#: card) or the session fails: the CLI forwards signals to the job in between and restores its handlers then.
OnStarted = Callable[[JobRun], Callable[[], None]]


class JobSession:
    """One `rigscope run`: ``run()`` does it all and returns the job's exit code (128 + N: died of signal N).

    ``backend`` is the GPU backend opened for it (the session closes it); ``chose_simulated`` says the user
    asked for the simulated GPU (else falling back to it is said). A ``UserError`` (a GPU that is not there,
    a guard below the GPU's temperature now, a command that cannot be started) comes before the job runs."""

    def __init__(self, argv: Sequence[str], backend: Any, db_path: Path, settings: config.Settings, *,
                 name: str | None = None, gpu_index: int | None = None, guard_c: float | None = None,
                 interval_s: float | None = None, output: Path | None = None, price_per_hour: float | None = None,
                 chose_simulated: bool = False, say: Callable[[str], None] = log.warning,
                 show_card: Callable[[str], None] = log.warning) -> None:
        self.argv = list(argv)
        if not self.argv:
            raise UserError("what should it run? Put the command after `--`: rigscope run -- python train.py")
        self.backend = backend
        self.db_path = db_path
        self.settings = settings
        self.name = name
        self.gpu_index = gpu_index
        self.guard_c = guard_c
        self.interval_s = interval_s if interval_s is not None else settings.sampling.interval_s
        self.output = output
        self.price_per_hour = price_per_hour
        self.chose_simulated = chose_simulated
        self.say = say
        self.show_card = show_card
        self.history: JobHistory | None = None
        self.sampler: Sampler | None = None
        self.job: JobRun | None = None

    # --- before the job ------------------------------------------------------------------

    def open(self) -> GuardSettings | None:
        """The GPU asked for, the history, the sampler, the guard's settings; the backend is closed on failure."""
        backend = self.backend
        try:
            known = {d.index for d in backend.devices()}
            if self.gpu_index is not None and self.gpu_index not in known:
                listed = ", ".join(str(d.index) for d in backend.devices()) or "none"
                raise UserError(f"--gpu {self.gpu_index}: there is no such GPU here (GPUs: {listed})")
            if backend.source.simulated and not self.chose_simulated:
                # Watching the simulated GPU instead would write a simulated machine into the user's history
                # and describe the simulation, not the job (issue 32): said before anything runs (exit 2).
                raise UserError(f"no NVIDIA GPU answers here ({printable(backend.source.fallback_reason or '')}): "
                                "there is no GPU to watch; add --simulate to try `rigscope run` on the simulated GPU")
            history = JobHistory(self.db_path)
            history.open()
            self.history = history
            if history.other_writer and backend.source.simulated:
                self.say("the recorder writes the history (the job's load shows in its simulated GPU); this job's "
                         "figures come from the samples it took of its own simulated GPU")
            elif history.other_writer:
                self.say("the recorder writes the history: its samples are the job's telemetry")
            host = open_host_backend() if history.writer is not None else None
            sampling = self.settings.sampling
            self.sampler = Sampler(backend, host, process_period_s=max(self.interval_s, sampling.process_interval_s))
            return self._guard(self.sampler)
        except BaseException:
            if self.history is not None:
                self.history.close()
                self.history = None
            backend.close()
            raise

    def _guard(self, sampler: Sampler) -> GuardSettings | None:
        if self.guard_c is None:
            return None
        watched = [d for d in sampler.gpu.devices() if self.gpu_index is None or d.index == self.gpu_index]
        jobs = self.settings.jobs
        try:
            check_guard_c(self.guard_c, watched, _temperatures(sampler, {d.index for d in watched}),
                          resume_offset_c=jobs.guard_resume_offset_c)
        except GuardRefused as exc:  # advisor's refusal, said to the user (exit 2)
            raise UserError(str(exc)) from None
        return GuardSettings(self.guard_c, resume_offset_c=jobs.guard_resume_offset_c,
                             min_pause_s=jobs.guard_min_pause_s, min_run_s=jobs.guard_min_run_s)

    # --- the whole sequence --------------------------------------------------------------

    def run(self, on_started: OnStarted | None = None) -> int:
        """Open, run the job to its end, conclude (card, stored record, ``output``); the job's exit code."""
        guard = self.open()
        assert self.history is not None and self.sampler is not None
        history, sampler = self.history, self.sampler
        fd, progress_name = tempfile.mkstemp(prefix="rigscope-progress-", suffix=".jsonl")
        os.close(fd)
        progress = Path(progress_name)
        run = JobRun(self.argv, sampler, name=self.name, history=history, gpu_index=self.gpu_index, guard=guard,
                     interval_s=self.interval_s, process_period_s=self.settings.sampling.process_interval_s,
                     progress_path=progress, say=self.say)
        self.job = run
        undo: Callable[[], None] | None = None
        try:
            try:
                run.start()
            except OSError as exc:  # not found, not executable: said like a shell says it
                raise UserError(f"cannot run {printable(self.argv[0])!r}: {exc.strerror or exc}") from None
            undo = on_started(run) if on_started is not None else None
            code = run.run()
            if undo is not None:
                done, undo = undo, None
                done()  # before the card: a signal from here on is rigscope's own again
            conclude(run, self.settings, history, self.output, self.price_per_hour, say=self.say,
                     show_card=self.show_card)
            return code
        finally:
            if undo is not None:
                undo()
            history.close()
            sampler.close()
            progress.unlink(missing_ok=True)


def _temperatures(sampler: Sampler, indices: set[int]) -> dict[int, float]:
    """The watched GPUs' temperatures now (those that can be read), for the guard's check before the job starts."""
    try:
        readings = sampler.gpu.sample(time.time())
    except Exception:  # a GPU that cannot be read now: the guard's other checks still hold
        return {}
    return {r.info.index: float(r.sample.temperature_c) for r in readings
            if r.info.index in indices and r.sample is not None and r.sample.temperature_c is not None}


# --- the end: card, stored record, run record ------------------------------------------------


def conclude(run: JobRun, settings: config.Settings, history: JobHistory, output: Path | None,
             price_per_hour: float | None = None, *, say: Callable[[str], None] = log.warning,
             show_card: Callable[[str], None] = log.warning) -> None:
    """The verdict, the card (shown, stored with the job) and the run record for ``output``."""
    series, _unit = run.series()
    verdict = run.verdict()
    sentence = str(verdict.get("sentence", "")) if verdict else None
    throttled = verdict.get("throttled") if verdict else None
    card_dict: dict[str, Any] | None = None
    # The history's writes at the end are time-boxed: rigscope exits with the job, what is not written is kept aside.
    deadline = time.monotonic() + END_WRITES_S
    try:
        history.writes.settle(deadline - time.monotonic())  # the job's row: its id is on the card
        run.record = replace(run.record, job_id=run.stored_job_id() or run.record.job_id)
        history.flush(deadline - time.monotonic())
        card = job_card(run, settings, history, series, sentence,
                        throttled=throttled if isinstance(throttled, bool) else None,
                        timeout_s=deadline - time.monotonic())
        note = run.guard_note()
        if note is not None:
            card = replace(card, notes=(*card.notes, note))
        card_dict = card.as_dict()
        from desktop.jobs.card import format_card

        # After a job's unfinished line (a tqdm bar) the card starts on a line of its own.
        show_card(("\n" if run.progress.line_open[2] else "") + format_card(card))
    except Exception as exc:  # the job is done: a card that cannot be made is said, not fatal
        say(f"no job card ({' '.join(str(exc).split()) or type(exc).__name__})")
        if sentence:
            say(sentence)
    run.record = replace(run.record, card=card_dict)
    run.store_end(series)
    run.settle_history(series, deadline)
    if output is not None:
        write_output(run, output, card_dict, price_per_hour, settings.costs.currency, say=say)


def job_card(run: JobRun, settings: config.Settings, history: JobHistory, series: Any, verdict: str | None, *,
             throttled: bool | None = None, timeout_s: float = 60.0) -> Any:
    """The job's one card: what it shows, stores (`rigscope jobs show`, the Jobs page) and writes with -o.

    From the history's samples over the job; where the history has none of the job's GPU (the recorder
    writes it and watches another GPU), or does not answer in ``timeout_s`` (our writer waits for a write
    lock held elsewhere), or where the job ran on the simulated GPU, from the samples the run took
    itself. The card, the verdict and the record read the samples the job took: a simulated recorder or window
    beside the job carries the job's load on the shared simulated machine (desktop/telemetry/simulated/shared.py),
    but samples it at its own moments and under its own interval, and a card mixed from both once said "GPU busy
    0 %" next to the job's own "at its 150 W power limit the whole run" (its record a mean power of 12 W beside a
    median of 149 W)."""
    from advisor.frame import HistoryFrame
    from desktop.advice import load_cloud_offers, load_gpu_specs
    from desktop.jobs.card import FRAME_MARGIN_S, build_card, job_frame, job_gpus
    from desktop.jobs.envelope_note import with_envelope_note
    from desktop.jobs.trace_frame import has_samples, trace_frame

    now = run.record.ended_s or run.clock()

    def make(store: HistoryStore | None) -> Any:
        frame = job_frame(store, run.record, now) if store is not None else \
            HistoryFrame(start_s=run.record.started_s, end_s=now + FRAME_MARGIN_S, gpus=())
        simulated = run.record.source == "simulated"
        if simulated or not has_samples(job_gpus(run.record, frame), run.record.started_s, now):
            arrays = {index: run.trace.arrays(index) for index in run.trace.columns}
            time_s = next(iter(arrays.values()))[0] if arrays else None
            if time_s is not None:
                own = trace_frame(run.infos, time_s, {i: cols for i, (_t, cols) in arrays.items()},
                                  start_s=frame.start_s, end_s=frame.end_s)
                frame = replace(frame, gpus=own.gpus, processes=None)  # the history's were sampled by another process
        card = build_card(run.record, series, frame, settings.costs, offers=load_cloud_offers(),
                          specs=load_gpu_specs(), verdict=verdict, now_s=now, throttled=throttled,
                          thresholds=settings.advisor)
        if simulated:
            card = replace(card, notes=(*card.notes, SIMULATED_LOAD_NOTE))
        if store is None:
            return card
        return with_envelope_note(card, store, run.record, now)  # the laptop's power envelope over the job

    try:
        return history.do(make, timeout_s=max(0.0, timeout_s))
    except TimeoutError:  # our writer waits for the write lock: the card from the run's own samples
        return make(None)


@dataclass(frozen=True)
class StoredJobCard:
    """One recorded job as read for its card: the record, its progress reports, the card (with the envelope note)
    and, where asked for, the job's telemetry."""

    record: JobRecord
    series: JobSeries
    card: JobCard
    frame: HistoryFrame | None = None


def read_job_card(store: HistoryStore, job_id: int, costs: CostSettings, *, now_s: float,
                  with_frame: bool = False) -> StoredJobCard | None:
    """The one read of a recorded job's card, for `rigscope jobs show` and the Jobs page; None: no such job.

    The card stored with a finished job, else one built now from the history (``card_of``), with the laptop's
    power envelope over the job; ``with_frame`` also reads the job's telemetry (the page charts it)."""
    from desktop.advice import load_cloud_offers, load_gpu_specs
    from desktop.jobs.card import card_of, job_frame
    from desktop.jobs.envelope_note import with_envelope_note

    record = store.job(job_id)
    if record is None:
        return None
    series = store.job_series(job_id)
    frame = job_frame(store, record, now_s) if with_frame else None
    card = card_of(store, record, series, costs, now_s=now_s, offers=load_cloud_offers(), specs=load_gpu_specs(),
                   frame=frame)
    card = with_envelope_note(card, store, record, now_s)  # the laptop's power envelope over the job
    return StoredJobCard(record, series, card, frame)


def write_output(run: JobRun, output: Path, card: dict[str, Any] | None, price_per_hour: float | None = None,
                 currency: str | None = None, *, say: Callable[[str], None] = log.warning) -> None:
    """The portable run record (`rigscope compare`) of the job; a file that cannot be written is said."""
    from desktop.stress.portable import record_from_job, write_record

    index = run.primary_gpu()
    time_s, columns = run.trace.arrays(index) if index is not None else (None, None)
    try:
        record = record_from_job(run.record, card, time_s=time_s, columns=columns,
                                 gpu=run.infos.get(index) if index is not None else None,
                                 price_per_hour=price_per_hour, currency=currency, pauses=run.pauses)
        write_record(output, record)
    except (OSError, ValueError) as exc:
        say(f"could not write {printable(output)}: {exc}")
