"""One `rigscope run`: the wrapped job watched from start to end — sampling, its PIDs and GPUs, the guard, history.

``JobRun`` samples the GPUs itself every interval (the guard needs live temperatures, and the process
lists say which GPUs the job's PIDs use). ``JobHistory`` decides where that goes: when `rigscope run`
can take the history's writer lock it writes the samples too, like the recorder; when the recorder
holds it, the recorder's samples are the job's telemetry and the job row, its events and its series
are short transactions beside it. On the simulated GPU the job is the load: full while it runs,
idle (its memory still held) while the guard keeps it stopped.
"""

from __future__ import annotations

import collections
import logging
import shlex
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from advisor.frame import held_most
from advisor.guard import GuardSettings, ThermalGuard
from advisor.progress import PROGRESS_ENV, JobSeries, OutputProgress, ProtocolProgress, throughput_series
from advisor.safetext import printable
from advisor.wording import count_text
from desktop.errors import UserError
from desktop.history.job_owner import HEARTBEAT_S, this_process
from desktop.history.lock import DatabaseBusy
from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from desktop.jobs.card import judge_job
from desktop.jobs.job_writes import JobWrites, keep_aside
from desktop.jobs.model import GuardEvent, JobRecord
from desktop.jobs.wrap import Watchdog, WrappedJob
from desktop.telemetry import owned
from desktop.telemetry.envelope import EnvelopeWatch
from desktop.telemetry.host import process_tree
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuInfo, Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend

log = logging.getLogger(__name__)
T = TypeVar("T")
#: At most this many processes that left the job's session are named (on the card, in messages).
MAX_ESCAPED = 20
#: At most this many PIDs are kept for the record: a job whose workers come and go had 271 in 40 s.
MAX_PIDS_KEPT = 1000
#: VRAM the simulated GPU shows the job holding (a mid-size training run).
SIM_JOB_VRAM_MIB = 6144.0


class JobHistory:
    """The history as `rigscope run` writes it: its own writer when it gets the lock, else beside the recorder.

    A database that cannot take the job (read-only, of a newer schema, damaged and not ours to move) never
    stops it: ``problem`` says why, once, and the run writes to a private database for its lifetime
    instead, so the card is built and printed as usual (and ``-o`` written), then the private one is removed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer: HistoryWriter | None = None
        #: Another process (the recorder, the window) writes the samples.
        self.other_writer = False
        #: Why the history at ``path`` cannot take the job (None: it can).
        self.problem: str | None = None
        self._private: Path | None = None
        #: The laptop's power envelope changes, written beside the samples as the recorder writes them.
        self._envelope = EnvelopeWatch()
        #: The job's own rows (start, heartbeats, guard events, end), in order, off the job's path.
        self.writes = JobWrites(self.do)
        #: The samples handed to our writer that it has not committed yet (the newest, as many as it holds).
        self._unwritten: collections.deque[Snapshot] = collections.deque()
        #: What could not be written in time was kept aside (``keep_aside``): closing waits no longer for it.
        self.kept_aside: Path | None = None

    def open(self) -> None:
        try:
            writer = HistoryWriter(self.path)
            try:
                writer.start()
            except DatabaseBusy:
                HistoryStore.open(self.path).close()  # the recorder writes it: can this Rigscope write beside it?
                self.other_writer = True
                return
            self.writer = writer
        except (UserError, OSError, sqlite3.Error) as exc:
            self.other_writer = False
            self.problem = " ".join(printable(exc).split()) or type(exc).__name__
            self._open_private()

    def _open_private(self) -> None:
        """A database of the run's own in a private temporary folder: the card needs the samples somewhere."""
        folder = Path(tempfile.mkdtemp(prefix="rigscope-run-"))
        self._private = folder
        writer = HistoryWriter(folder / "job.sqlite")
        try:
            writer.start()
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            self._private = None
            raise
        self.writer = writer

    def submit(self, snapshot: Snapshot) -> None:
        if self.writer is not None:
            self.writer.submit(snapshot)
            for event in self._envelope.events(snapshot):
                self.writer.add_event(*event)
            if self._private is None:
                self._unwritten.append(snapshot)
                pending = self.writer.status.rows_pending
                while len(self._unwritten) > pending:
                    self._unwritten.popleft()

    def unwritten(self) -> list[Snapshot]:
        """The samples our writer holds, not committed yet (none beside the recorder, or in a private database)."""
        if self.writer is None or self._private is not None:
            return []
        pending = self.writer.status.rows_pending
        return list(self._unwritten)[-pending:] if pending else []

    def do(self, fn: Callable[[HistoryStore], T], timeout_s: float = 60.0) -> T:
        """``fn(store)`` on the writer's thread when we hold the lock, else on a short connection of its own."""
        if self.writer is not None:
            try:
                return self.writer.call(fn).result(timeout=timeout_s)
            except FutureTimeout as exc:
                raise TimeoutError(f"the history database did not answer in {timeout_s:.3g} s") from exc
        store = HistoryStore.open(self.path)
        try:
            return fn(store)
        finally:
            store.close()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait up to ``timeout_s`` for the samples submitted so far to be written; True when they were."""
        if self.writer is not None:
            return self.writer.flush(timeout_s=max(0.0, timeout_s))
        return True

    def keep_aside(self, record: JobRecord, series: JobSeries | None, now_s: float) -> tuple[Path, int, int]:
        """What the history did not take in time, in a database of its own beside it (``job_writes.keep_aside``):
        (its path, the job's id there, how many samples); nothing more is written here after it."""
        self.writes.abandon()
        snapshots = self.unwritten()
        path, job_id = keep_aside(self.path, record, series, snapshots, now_s)
        self.kept_aside = path
        return path, job_id, len(snapshots)

    def close(self) -> None:
        """Write what is left, then close. After ``keep_aside`` it waits a second at most: what it could not
        write is in the file kept aside, and rigscope exits with the job (the writer's thread ends with it)."""
        if self.kept_aside is None:
            self.writes.settle(None)
        self.writes.abandon()  # its thread ends (nothing is left to write, or it was kept aside)
        if self.writer is not None:
            writer, self.writer = self.writer, None
            if self.kept_aside is None:
                writer.close()
            else:
                closing = threading.Thread(target=writer.close, name="rigscope-run-close", daemon=True)
                closing.start()
                closing.join(1.0)
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None


#: What the trace keeps per GPU and sample: the sample's metrics and the power limit then in force.
_TRACE_COLUMNS = (*GPU_METRIC_NAMES, "power_limit_w")


@dataclass
class _Trace:
    """The job's GPU samples as `rigscope run` read them, per GPU index (for the verdict and the portable record)."""

    time_s: list[float] = field(default_factory=list)
    columns: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, snapshot: Snapshot) -> None:
        row = len(self.time_s)
        self.time_s.append(snapshot.time_s)
        for reading in snapshot.gpus:
            cols = self.columns.setdefault(reading.info.index, {name: [np.nan] * row for name in _TRACE_COLUMNS})
            for name in GPU_METRIC_NAMES:
                value = getattr(reading.sample, name, None) if reading.sample is not None else None
                cols[name].append(np.nan if value is None else float(value))
            # The limit in force at this sample (a firmware mode switch during the job moves it).
            limit = reading.info.power_limit_enforced_w
            cols["power_limit_w"].append(np.nan if limit is None else float(limit))
        for cols in self.columns.values():  # a GPU missing from this snapshot
            for values in cols.values():
                if len(values) == row:
                    values.append(np.nan)

    def arrays(self, index: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cols = self.columns.get(index, {})
        return np.asarray(self.time_s, dtype=np.float64), {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}


class JobRun:
    """Runs ``argv`` wrapped, watches it every ``interval_s``, guards it, and keeps its record."""

    def __init__(self, argv: Sequence[str], sampler: Sampler, *, name: str | None = None,
                 history: JobHistory | None = None, gpu_index: int | None = None, guard: GuardSettings | None = None,
                 interval_s: float = 1.0, process_period_s: float = 5.0, progress_path: Path | None = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] | None = None,
                 wait: Callable[[float], None] | None = None,
                 say: Callable[[str], None] = log.warning, env: Mapping[str, str] | None = None,
                 use_pty: bool | None = None, stdout_fd: int = 1, stderr_fd: int = 2, watchdog: bool = True) -> None:
        self.argv = list(argv)
        self.sampler = sampler
        self.history = history
        self.gpu_index = gpu_index
        self.guard = ThermalGuard(guard, clock()) if guard is not None else None
        self.interval_s = interval_s
        self.process_period_s = process_period_s
        self.progress_path = progress_path
        self.clock = clock
        #: Times the job (its duration, from the wrapper's start and exit moments). A ``clock`` passed without it
        #: stands for both (a test's simulated seconds); the wall clock's default is the monotonic clock.
        self.monotonic = monotonic if monotonic is not None else (time.monotonic if clock is time.time else clock)
        self._wait = wait
        self.say = say
        self._env = env
        self._use_pty = use_pty
        self._fds = (stdout_fd, stderr_fd)
        self._want_watchdog = watchdog
        self.output = {1: OutputProgress(), 2: OutputProgress()}
        self.protocol = ProtocolProgress()
        #: Whether the job's last output on each stream left a line unfinished (a tqdm bar).
        self.line_open = {1: False, 2: False}
        self._protocol_at = 0
        self.trace = _Trace()
        #: PIDs seen in the job's session, for the record and the GPUs it used: never signalled (a PID seen minutes
        #: ago may be another user's process now; signals go to the session's members as /proc lists them then).
        self.pids: dict[int, None] = {}
        #: Processes of the job that left its session (setsid, a daemon's double fork): the guard cannot stop
        #: them. (pid, start ticks) -> name.
        self.escaped: dict[tuple[int, int], str] = {}
        self._members_seen: set[tuple[int, int]] = set()
        self._marker: bytes | None = None
        #: Processes outside the session whose environment was read already (each is read once).
        self._environ_read: set[tuple[int, int]] = set()
        self.gpus: dict[int, str] = {}  # index -> uuid, in the order first seen
        self.events: list[GuardEvent] = []
        self.pauses: list[tuple[float, float]] = []
        self.record = JobRecord(job_id=0, name=name or _default_name(self.argv), argv=tuple(self.argv),
                                started_s=clock(), guard_c=guard.limit_c if guard else None,
                                source="simulated" if sampler.gpu.source.simulated else "nvml")
        self.job: WrappedJob | None = None
        self.watchdog: Watchdog | None = None
        self._tree_at: float | None = None
        self._warned_ranks = False
        self._history_problem: str | None = None
        #: The job's row being added to the history (its id once done): None where there is no history row.
        self._added: Future[int] | None = None
        #: The job's end being written (``store_end``).
        self._ended: Future[None] | None = None
        #: Heartbeats asked for: one that a newer one follows in the queue is skipped (a held lock piles none up).
        self._heartbeats = 0
        self.infos: dict[int, GpuInfo] = {info.index: info for info in sampler.gpu.devices()}

    # --- start ---------------------------------------------------------------------------

    def start(self) -> None:
        env = dict(self._env) if self._env is not None else None
        if self.progress_path is not None:
            import os

            env = dict(os.environ) if env is None else env
            env[PROGRESS_ENV] = str(self.progress_path)
            # Inherited by every process the job starts, daemons too: how one that left the session is found.
            self._marker = f"{PROGRESS_ENV}={self.progress_path}".encode("utf-8", "surrogateescape")
        started = self.clock()
        self.record = replace(self.record, started_s=started, owner=this_process(), last_seen_s=started)
        self.job = WrappedJob(self.argv, env=env, on_output=self._on_output, use_pty=self._use_pty,
                              monotonic=self.monotonic, stdout_fd=self._fds[0], stderr_fd=self._fds[1])
        self.pids[self.job.pid] = None
        if self._want_watchdog:
            try:
                with self.job.relay_lock:  # no relay may close between handing its descriptor over and this
                    self.watchdog = Watchdog(self.job)
                    self.job.on_reader_gone = self.watchdog.drop
            except OSError as exc:
                self.say(f"could not start the watchdog ({exc}): if rigscope is killed while the job is paused, "
                         f"continue it yourself with `kill -CONT -{self.job.pgid}`")
        self._set_sim_load(running=True)
        if self.history is not None and self.history.problem:
            self.say(f"the history cannot take the job ({self.history.problem}): the job runs and its card is "
                     "printed, but it is not stored")
            return  # no job row (its id would name nothing `rigscope jobs` can show): the samples, for the card
        record = self.record
        self._added = self._later(lambda store: store.add_job(record))

    def _note_job_id(self) -> None:
        """``record.job_id`` once the history added the job's row (it is added off the job's path)."""
        if not self.record.job_id and (job_id := self.stored_job_id()):
            self.record = replace(self.record, job_id=job_id)

    def stored_job_id(self) -> int:
        """The job's id in the history once its row was added (0 before, or when it could not be)."""
        added = self._added
        if added is None or not added.done() or added.cancelled() or added.exception() is not None:
            return 0
        return int(added.result() or 0)

    def _on_output(self, stream: int, chunk: bytes, time_s: float) -> None:
        self.output[stream].feed(chunk, time_s)
        self.line_open[stream] = not chunk.endswith(b"\n")

    # --- each tick -----------------------------------------------------------------------

    def step(self) -> Snapshot:
        """Sample, follow the job's processes, read its progress file, let the guard act."""
        assert self.job is not None
        snapshot = self.sampler.tick()
        if self.history is not None:
            self.history.submit(snapshot)
        self.trace.add(snapshot)
        now = snapshot.time_s
        if self._tree_at is None or now - self._tree_at >= self.process_period_s or snapshot.processes_fresh:
            self._tree_at = now
            self._follow_tree(snapshot)
        self._read_protocol(now)
        self._note_job_id()
        self._heartbeat(now)
        if self.guard is not None and self.job.poll() is None:
            self._guard(snapshot, now)
        return snapshot

    def _follow_tree(self, snapshot: Snapshot) -> None:
        assert self.job is not None
        before = len(self.pids)
        members = self.job.members()
        current = {m.pid for m in members} if self.job.session is not None else set(process_tree(self.job.pid))
        if self.job.session is not None:
            self._find_escaped(members)
            proc_root = self.job.session.proc
            # Those still alive: the PID of one that ended is not the job's any more.
            current |= {pid for pid, start in self.escaped
                        if (now := owned.read_stat(pid, proc_root)) is not None and now.start_ticks == start}
        for pid in sorted(current):
            if len(self.pids) >= MAX_PIDS_KEPT:
                break
            self.pids.setdefault(pid, None)
        if len(self.pids) != before and self.watchdog is not None:
            self.watchdog.tell_pids(sorted(current))
        uuids = {r.info.index: r.info.uuid for r in snapshot.gpus}
        for proc in snapshot.processes:
            if proc.pid in current and proc.gpu_index not in self.gpus:
                self.gpus[proc.gpu_index] = uuids.get(proc.gpu_index, "")
        if self.guard is not None and len(self.gpus) > 1 and not self._warned_ranks:
            self._warned_ranks = True
            self.say(f"the job uses {len(self.gpus)} GPUs ({', '.join(str(i) for i in self.gpus)}): pausing it "
                     "stops every rank, and ranks that talk to each other (NCCL) all wait while it is paused")

    def _find_escaped(self, members: list[owned.Member]) -> None:
        """Processes of the job outside its session now: a child that called setsid, a member seen before that
        left, a daemon (double fork) that still has the job's environment. Named, never signalled."""
        assert self.job is not None and self.job.session is not None
        session = self.job.session
        found: list[owned.Member] = []
        for pid in process_tree(self.job.pid)[1:]:
            member = owned.read_stat(pid, session.proc)
            if member is not None and member.sid != session.sid:
                found.append(member)
        for pid, start in self._members_seen:
            member = owned.read_stat(pid, session.proc)
            if member is not None and member.start_ticks == start and member.sid != session.sid:
                found.append(member)
        if self._marker is not None:
            if len(self._environ_read) > 100_000:  # a long job on a busy machine: start over rather than grow
                self._environ_read.clear()
            for member in owned.all_processes(session.proc):
                if member.sid == session.sid or member.start_ticks < session.leader_start_ticks \
                        or member.identity in self._environ_read:
                    continue
                self._environ_read.add(member.identity)
                if owned.environ_has(member.pid, self._marker, session.proc):
                    found.append(member)
        self._members_seen = {m.identity for m in members}
        for member in found:
            if member.state in ("Z", "X") or member.identity in self.escaped or len(self.escaped) >= MAX_ESCAPED:
                continue
            self.escaped[member.identity] = member.name
            if self.guard is not None:
                self.say(f"pid {member.pid} ({printable(member.name)}) left the job's session (setsid, or a "
                         "daemon's double fork): the guard cannot pause it, it runs on while the job is paused")

    def guard_note(self) -> str | None:
        """For the card: the job's processes the guard could not stop, when there is a guard and were any."""
        if self.guard is None or not self.escaped:
            return None
        named = ", ".join(f"pid {pid} ({printable(name)})" for (pid, _), name in list(self.escaped.items())[:5])
        more = f" and {len(self.escaped) - 5} more" if len(self.escaped) > 5 else ""
        count = len(self.escaped)
        return (f"not under the guard: {count} process{'es' if count != 1 else ''} of the job left its session "
                f"(setsid, a daemon's double fork) and {'were' if count != 1 else 'was'} never paused: {named}{more}")

    def _read_protocol(self, now: float) -> None:
        if self.progress_path is None:
            return
        try:
            with self.progress_path.open("rb") as handle:
                handle.seek(self._protocol_at)
                data = handle.read(1 << 20)
        except OSError:
            return
        self._protocol_at += len(data)
        if data:
            try:
                self.protocol.feed(data, now)
            except Exception:  # the parser is bounded; should it still fail, the line is lost, never the run
                self.protocol.bad_lines += 1

    def watched_gpus(self) -> list[int]:
        """The GPUs the guard watches: --gpu, else the job's own, else every GPU (until its own are known)."""
        if self.gpu_index is not None:
            return [self.gpu_index]
        return list(self.gpus) or sorted(self.infos)

    def _guard(self, snapshot: Snapshot, now: float) -> None:
        assert self.guard is not None and self.job is not None
        watched = set(self.watched_gpus())
        temps = [(r.sample.temperature_c, r.info.index) for r in snapshot.gpus
                 if r.info.index in watched and r.sample is not None and r.sample.temperature_c is not None]
        hottest = max(temps) if temps else None
        if self.guard.paused and self.job.stopped() is False:
            self._continued_elsewhere(now, hottest)
        action = self.guard.update(hottest[0] if hottest else None, now)
        if action is None:
            return
        temp, index = hottest if hottest else (None, None)
        if action == "pause":
            self.job.stop(self._windows_pids())
            self._set_sim_load(running=False)
            limit, resume = self.guard.settings.limit_c, self.guard.settings.resume_c
            self.say(f"paused the job: GPU {index} at {temp:.0f} °C reached the guard of {limit:g} °C; "
                     f"it continues at {resume:g} °C or below")
        else:
            self.job.cont(self._windows_pids())
            self._set_sim_load(running=True)
            self.pauses.append((self.events[-1].time_s if self.events else now, now))
            paused_from, paused_to = self.pauses[-1]
            self.say(f"continued the job: GPU {index} at {temp:.0f} °C (paused {paused_to - paused_from:.0f} s)")
        self._add_event(GuardEvent(now, action, temp, index))

    def _windows_pids(self) -> list[int]:
        """What Windows suspends (it has no sessions: the tree as psutil lists it now); nothing on POSIX."""
        import os

        return process_tree(self.job.pid) if os.name == "nt" and self.job is not None else []

    def _continued_elsewhere(self, now: float, hottest: tuple[float, int] | None) -> None:
        """The guard holds the job paused but /proc shows it running (a forwarded signal's SIGCONT, a
        ``kill -CONT`` from elsewhere): the pause ends here, and the guard decides afresh from this reading."""
        assert self.guard is not None
        self.guard.resumed_elsewhere(now)
        self._set_sim_load(running=True)
        self.pauses.append((self.events[-1].time_s if self.events else now, now))
        temp, index = hottest if hottest else (None, None)
        self.say("the job runs again though the guard had paused it (continued from outside the guard); "
                 "the guard takes it up from here")
        self._add_event(GuardEvent(now, "resume", temp, index))

    def _add_event(self, event: GuardEvent) -> None:
        assert self.guard is not None
        self.events.append(event)
        action, temp, index = event.kind, event.temperature_c, event.gpu_index
        if self._added is not None:
            at = f"{temp:.0f} °C" if temp is not None else "an unknown temperature"
            limit_c, name = self.guard.settings.limit_c, self.record.name
            uuid = self.infos[index].uuid if index in self.infos else None

            def write(store: HistoryStore) -> None:
                job_id = self.stored_job_id()  # its row was added before (the writes run in order), or never
                if job_id:
                    detail = f"job {job_id} ({name}): {action} at {at}, guard {limit_c:g} °C"
                    store.add_job_event(job_id, event, uuid, detail)

            self._later(write)

    def _set_sim_load(self, running: bool, *, ended: bool = False) -> None:
        """The job's load on its simulated GPU: full while it runs, none while paused; its memory freed once
        it ended (so the other processes sharing the simulated machine no longer list it)."""
        backend = self.sampler.gpu
        manual = backend.manual if isinstance(backend, SimulatedBackend) else None
        if manual is None or self.job is None:
            return
        index = self.gpu_index if self.gpu_index is not None else 0
        # Its pid, name and command: the job's process, on every simulated machine of this user that shares the load.
        manual.set(index, 1.0 if running else 0.0, vram_mib=0.0 if ended else SIM_JOB_VRAM_MIB, name=self.record.name,
                   pid=self.job.pid,
                   command=shlex.join(self.argv), started_s=self.record.started_s)

    # --- the loop and the end ------------------------------------------------------------

    def forward(self, sig: int) -> None:
        """A signal for rigscope goes to the job; a stopped job is continued so that it can act on it."""
        if self.job is None:
            return
        self.job.send_signal(sig)
        if self.guard is not None and self.guard.paused:
            self.job.cont(self._windows_pids())  # the next step reads it back: the guard takes it up from there

    def hold(self, stop: bool) -> None:
        """Stop the job with rigscope (Ctrl+Z), or continue it when rigscope continues (unless the guard holds it)."""
        if self.job is None:
            return
        if stop:
            self.job.stop(self._windows_pids())
        elif self.guard is None or not self.guard.paused:
            self.job.cont(self._windows_pids())

    def run(self) -> int:
        """Start (unless started), watch until the job ends, finish; the job's exit code."""
        if self.job is None:
            self.start()
        assert self.job is not None
        job = self.job
        while job.poll() is None:
            started = time.monotonic()
            self.step()
            left = max(0.0, self.interval_s - (time.monotonic() - started))
            if self._wait is not None:
                self._wait(left)
            else:
                job.wait(left)
        self.finish()
        return int(job.poll() or 0)

    def finish(self) -> JobRecord:
        """After the job ended: pass on its last output, close the watchdog, store the record and series."""
        assert self.job is not None
        code = self.job.poll()
        ended = self.job.finish_output()
        if self.watchdog is not None:
            # A process the job left (a daemon) still writes to its output: the watchdog passes it on from here.
            self.watchdog.close(done=True, relay=not ended)
        end = self.ended_at()
        self._set_sim_load(running=False, ended=True)
        if self.guard is not None and self.guard.paused and self.events:
            self.pauses.append((self.events[-1].time_s, end))
        for parser in self.output.values():
            parser.finish(end)
        self._read_protocol(end)
        self.protocol.finish(end)
        if self.protocol.bad_lines:
            self.say(f"{count_text(self.protocol.bad_lines, 'line')} in {PROGRESS_ENV} were not "
                     '{"items": N, "unit": "..."} and were skipped')
        _series, unit = self.series()
        paused_s = self.guard.total_paused_s(end) if self.guard is not None else 0.0
        self._note_job_id()
        self.record = replace(self.record, ended_s=end, exit_code=code, pids=tuple(self.pids),
                              gpu_uuids=tuple(u for u in self.gpus.values() if u), gpu_indices=tuple(self.gpus),
                              throughput_unit=unit, paused_s=paused_s, events=tuple(self.events))
        return self.record

    def ended_at(self) -> float:
        """When the job ended, on ``clock``: its start plus its duration as the wrapper timed it (the moment its
        process exited, whatever rigscope did after); now, where that moment is unknown."""
        duration = self.job.duration_s if self.job is not None else None
        if duration is None:
            return self.clock()
        return self.record.started_s + duration

    def series(self) -> tuple[JobSeries, str | None]:
        rates = sorted((r for p in self.output.values() for r in p.readings), key=lambda r: r.time_s)
        return throughput_series(self.trace.time_s, rates, self.protocol.readings, self.pauses)

    def primary_gpu(self) -> int | None:
        """The GPU the verdict is judged on: --gpu, else the job's first, else the only one."""
        if self.gpu_index is not None:
            return self.gpu_index
        if self.gpus:
            return next(iter(self.gpus))
        return next(iter(sorted(self.infos)), None)

    def verdict(self) -> dict[str, Any] | None:
        """The throttle verdict on the job's own throughput (the SM clock when it reported none), as a dict."""
        index = self.primary_gpu()
        if index is None:
            return None
        time_s, columns = self.trace.arrays(index)
        series, unit = self.series()
        info = self.infos.get(index)
        # The limit over most of the job (each sample's is in ``columns``), not the one read last.
        limit_w = held_most(columns["power_limit_w"]) if "power_limit_w" in columns else None
        if limit_w is None and info is not None:
            limit_w = info.power_limit_enforced_w
        return judge_job(time_s, columns, series.throughput if unit is not None else None, unit or "",
                         pauses=self.pauses, sm_clock_max_mhz=info.sm_clock_max_mhz if info else None,
                         power_limit_w=limit_w,
                         temp_slowdown_c=info.temp_slowdown_c if info else None).as_dict()

    def store_end(self, series: JobSeries) -> Future[None] | None:
        """The finished record and its series into the history (None without one), after the writes asked for
        before: not waited for here (``JobHistory.writes.settle`` does, time-boxed)."""
        if self._added is None:
            return None
        record = self.record

        def write(store: HistoryStore) -> None:
            job_id = self.stored_job_id()
            if job_id:
                store.update_job(replace(record, job_id=job_id))
                store.set_job_series(job_id, series)

        self._ended = self._later(write)
        return self._ended

    def settle_history(self, series: JobSeries, deadline: float) -> None:
        """At the end: wait until ``deadline`` (``time.monotonic``) for the job's rows and samples to be written;
        what the history did not take by then (a write lock held elsewhere) is kept aside and said, not lost."""
        history = self.history
        if history is None or self._added is None or history.kept_aside is not None:
            return
        rows_done = history.writes.settle(deadline - time.monotonic())
        samples_done = history.flush(deadline - time.monotonic())
        ended = self._ended
        if rows_done and samples_done and self.stored_job_id() and ended is not None and ended.done() \
                and not ended.cancelled() and ended.exception() is None:
            return
        why = "it did not answer in time: another process holds its write lock" if not (rows_done and samples_done) \
            else (self._history_problem or "it refused the job")
        try:
            path, job_id, count = history.keep_aside(self.record, series, self.clock())
        except Exception as exc:  # nowhere to keep it: said with what is lost
            self.say(f"the job's record and {count_text(len(history.unwritten()), 'sample')} could not be written "
                     f"to the history ({why}) nor kept aside ({' '.join(printable(exc).split())})")
            return
        self.say(f"the history {printable(history.path)} did not take the job ({why}): its record and "
                 f"{count_text(count, 'sample')} not written there are kept in {printable(path)} (job {job_id} there: "
                 f"rigscope jobs show {job_id} --db {printable(path)})")

    def _heartbeat(self, now: float) -> None:
        """Every ``HEARTBEAT_S`` the job's row says this rigscope lives: if it dies, the next command
        that opens the history closes the job at the last heartbeat (``HistoryStore.close_orphaned_jobs``)."""
        seen = self.record.last_seen_s
        # On our own writer's thread a heartbeat is one UPDATE: each second; beside the recorder it opens a
        # connection: every HEARTBEAT_S.
        own = self.history is not None and self.history.writer is not None
        period = max(1.0, self.interval_s) if own else HEARTBEAT_S
        if self._added is None or (seen is not None and now - seen < period):
            return
        self.record = replace(self.record, last_seen_s=now)
        record = self.record
        self._heartbeats += 1
        ticket = self._heartbeats

        def write(store: HistoryStore) -> None:
            job_id = self.stored_job_id()
            if job_id and ticket == self._heartbeats:
                store.heartbeat(replace(record, job_id=job_id), now)

        self._later(write)

    def _later(self, fn: Callable[[HistoryStore], T]) -> Future[T] | None:
        """Write to the history after the writes asked for before, off the job's path (``JobWrites``); a failure
        is said once and the job goes on without it."""
        if self.history is None:
            return None
        future = self.history.writes.later(fn)
        future.add_done_callback(self._said_failure)
        return future

    def _said_failure(self, future: Future[Any]) -> None:
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, Exception):  # a full disk or a read-only file must not stop the user's job
            problem = " ".join(printable(exc).split()) or type(exc).__name__
            if problem != self._history_problem:
                self._history_problem = problem
                self.say(f"could not write the job to the history ({problem}); the job goes on")


def _default_name(argv: Sequence[str]) -> str:
    """``python train.py --lr 3e-4`` -> ``train.py``, ``python -m pkg.train`` -> ``pkg.train``,
    ``python3 -c 'print(1)'`` -> itself (the code shortened to fit 60 characters), else the program."""
    from pathlib import PurePath

    program = PurePath(argv[0]).name if argv else "job"
    if not program.startswith("python") or len(argv) < 2:
        return program or "job"
    rest = list(argv[1:])
    for flag in ("-m", "-c"):
        if flag in rest:
            at = rest.index(flag)
            if at + 1 >= len(rest):
                return f"{program} {flag}"
            if flag == "-m":
                return rest[at + 1][:60]
            # "python3 -c 'print(1)'": the code's start, on one line ("python3 -c" named every such job alike).
            code = " ".join(rest[at + 1].split())
            room = 60 - len(program) - 6
            return f"{program} -c '{code if len(code) <= room else code[:room - 1] + '…'}'"
    scripts = [w for w in rest if not w.startswith("-")]
    return PurePath(scripts[0]).name if scripts else program
