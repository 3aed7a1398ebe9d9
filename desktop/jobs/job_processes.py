"""The job's processes as `rigscope run` follows them: the PIDs of its session, those that left it, their GPUs.

Each look reads the job's session as /proc lists it now (or its process tree, where there are no sessions),
finds the processes that left the session (setsid, a member seen before, a daemon that kept the job's
environment), and takes the GPUs the process lists show them using. PIDs are kept for the record only:
never signalled from here (a PID seen minutes ago may be another user's process now).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from advisor.safetext import printable
from desktop.telemetry import owned
from desktop.telemetry.host import process_tree
from desktop.telemetry.model import Snapshot

if TYPE_CHECKING:
    from desktop.jobs.wrap import Watchdog, WrappedJob

#: At most this many processes that left the job's session are named (on the card, in messages).
MAX_ESCAPED = 20
#: At most this many PIDs are kept for the record: a job whose workers come and go had 271 in 40 s.
MAX_PIDS_KEPT = 1000


class JobProcesses:
    """What the looks at the job's processes found so far; ``say`` tells the user what the guard cannot do."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        #: PIDs seen in the job's session, for the record and the GPUs it used: never signalled (a PID seen minutes
        #: ago may be another user's process now; signals go to the session's members as /proc lists them then).
        self.pids: dict[int, None] = {}
        #: Processes of the job that left its session (setsid, a daemon's double fork): the guard cannot stop
        #: them. (pid, start ticks) -> name.
        self.escaped: dict[tuple[int, int], str] = {}
        self._members_seen: set[tuple[int, int]] = set()
        #: ``PROGRESS_ENV=<path>`` as every process the job starts inherits it: how a daemon that left is found.
        self.marker: bytes | None = None
        #: Processes outside the session whose environment was read already (each is read once).
        self._environ_read: set[tuple[int, int]] = set()
        self.gpus: dict[int, str] = {}  # index -> uuid, in the order first seen
        self._warned_ranks = False

    def follow(self, job: WrappedJob, snapshot: Snapshot, watchdog: Watchdog | None, guarded: bool) -> None:
        """One look: the job's processes now, those that left its session, and the GPUs ``snapshot`` shows
        them on; the watchdog is told the PIDs when they changed. ``guarded``: a guard acts on the job."""
        before = len(self.pids)
        members = job.members()
        current = {m.pid for m in members} if job.session is not None else set(process_tree(job.pid))
        if job.session is not None:
            self._find_escaped(job, members, guarded)
            proc_root = job.session.proc
            # Those still alive: the PID of one that ended is not the job's any more.
            current |= {pid for pid, start in self.escaped
                        if (now := owned.read_stat(pid, proc_root)) is not None and now.start_ticks == start}
        for pid in sorted(current):
            if len(self.pids) >= MAX_PIDS_KEPT:
                break
            self.pids.setdefault(pid, None)
        if len(self.pids) != before and watchdog is not None:
            watchdog.tell_pids(sorted(current))
        uuids = {r.info.index: r.info.uuid for r in snapshot.gpus}
        for proc in snapshot.processes:
            if proc.pid in current and proc.gpu_index not in self.gpus:
                self.gpus[proc.gpu_index] = uuids.get(proc.gpu_index, "")
        if guarded and len(self.gpus) > 1 and not self._warned_ranks:
            self._warned_ranks = True
            self.say(f"the job uses {len(self.gpus)} GPUs ({', '.join(str(i) for i in self.gpus)}): pausing it "
                     "stops every rank, and ranks that talk to each other (NCCL) all wait while it is paused")

    def _find_escaped(self, job: WrappedJob, members: list[owned.Member], guarded: bool) -> None:
        """Processes of the job outside its session now: a child that called setsid, a member seen before that
        left, a daemon (double fork) that still has the job's environment. Named, never signalled."""
        assert job.session is not None
        session = job.session
        found: list[owned.Member] = []
        for pid in process_tree(job.pid)[1:]:
            member = owned.read_stat(pid, session.proc)
            if member is not None and member.sid != session.sid:
                found.append(member)
        for pid, start in self._members_seen:
            member = owned.read_stat(pid, session.proc)
            if member is not None and member.start_ticks == start and member.sid != session.sid:
                found.append(member)
        if self.marker is not None:
            if len(self._environ_read) > 100_000:  # a long job on a busy machine: start over rather than grow
                self._environ_read.clear()
            for member in owned.all_processes(session.proc):
                if member.sid == session.sid or member.start_ticks < session.leader_start_ticks \
                        or member.identity in self._environ_read:
                    continue
                self._environ_read.add(member.identity)
                if owned.environ_has(member.pid, self.marker, session.proc):
                    found.append(member)
        self._members_seen = {m.identity for m in members}
        for member in found:
            if member.state in ("Z", "X") or member.identity in self.escaped or len(self.escaped) >= MAX_ESCAPED:
                continue
            self.escaped[member.identity] = member.name
            if guarded:
                self.say(f"pid {member.pid} ({printable(member.name)}) left the job's session (setsid, or a "
                         "daemon's double fork): the guard cannot pause it, it runs on while the job is paused")

    def guard_note(self) -> str | None:
        """For the card of a guarded job: the job's processes the guard could not stop, when there were any."""
        if not self.escaped:
            return None
        named = ", ".join(f"pid {pid} ({printable(name)})" for (pid, _), name in list(self.escaped.items())[:5])
        more = f" and {len(self.escaped) - 5} more" if len(self.escaped) > 5 else ""
        count = len(self.escaped)
        return (f"not under the guard: {count} process{'es' if count != 1 else ''} of the job left its session "
                f"(setsid, a daemon's double fork) and {'were' if count != 1 else 'was'} never paused: {named}{more}")
