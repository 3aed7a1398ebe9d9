"""The workload child's step loop: bounded queue of GPU work, a report about once a second, an on-time end.

CUDA kernels run asynchronously: ``step()`` only queues work, and the driver accepts about a
thousand launches before it blocks. A loop that reads the wall clock after each launch and
synchronises only once a second can queue many seconds of work on a slow GPU; the reports
then come in bursts and the run overruns its end by that much. Here the loop marks the queue
with a fence every batch of steps and waits for the previous batch's fence before it queues
more, so at most two batches are in flight; a batch is sized to take about
``BATCH_TARGET_S``. Each report drains the queue first, so its rate counts exactly the steps
that ran in its window. No torch here: the fence is passed in (a CUDA event in the child, a no-op on the CPU),
and tests drive the loop with a fake slow device and an injected clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

REPORT_PERIOD_S = 1.0
#: GPU time one batch of steps should take: short enough for on-time reports and ends,
#: long enough that waiting on a fence per batch costs nothing measurable.
BATCH_TARGET_S = 0.1
MAX_BATCH = 1024
#: A batch taking this share of the report period or more is finished before the next is queued.
SLOW_BATCH_SHARE = 0.25


class Fence(Protocol):
    def wait(self) -> None:
        """Return once every step queued before the fence was made has finished."""


class Steppable(Protocol):
    unit: str
    work_per_step: float

    def step(self) -> None: ...

    def check(self) -> int: ...


class _Done:
    def wait(self) -> None:
        pass


def no_fence() -> Fence:
    """The CPU's fence: its steps are synchronous, so everything queued has finished."""
    return _Done()


@dataclass
class _Batch:
    fence: Fence
    steps: int


def drive(workload: Steppable, seconds: float, emit: Callable[[dict[str, Any]], None], *,
          fence: Callable[[], Fence] = no_fence, clock: Callable[[], float] = time.monotonic,
          check_period_s: float = 2.0, report_period_s: float = REPORT_PERIOD_S,
          batch_target_s: float = BATCH_TARGET_S,
          on_report: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run ``workload`` for ``seconds``: progress records via ``emit``; returns the totals for "done"."""
    started = clock()
    end = started + seconds
    errors = checks = 0
    completed = 0  # steps known finished (their fence was waited on)
    window_start, window_base = started, 0
    next_check = started + min(check_period_s, report_period_s)
    batch = 1
    pace_s: float | None = None  # seconds per step, once a batch was seen to finish
    in_flight: _Batch | None = None
    last_boundary = started
    while True:
        for _ in range(batch):
            workload.step()
        queued = _Batch(fence(), batch)
        finished = 0
        if in_flight is not None:
            in_flight.fence.wait()  # at most two batches queued: the one just made and this one
            finished += in_flight.steps
        in_flight = queued
        if pace_s is not None and queued.steps * pace_s >= SLOW_BATCH_SHARE * report_period_s:
            # Steps this slow gain nothing from queuing ahead: finish this batch now, so that a
            # report never waits for two of them.
            queued.fence.wait()
            finished += queued.steps
            in_flight = None
        completed += finished
        now = clock()
        if finished:
            # While the device is the bottleneck it ran the finished steps since the last boundary.
            # The next batch grows at most twofold, so a misjudged pace costs little.
            pace_s = max(now - last_boundary, 1e-9) / finished
            batch = max(1, min(MAX_BATCH, 2 * batch, int(batch_target_s / pace_s)))
        last_boundary = now
        # Stop queuing when ending with the batch in flight lands nearer the end than one more batch would.
        queued_steps = in_flight.steps if in_flight is not None and fence is not no_fence else 0
        finishing = now >= end or (pace_s is not None and now + (queued_steps + 0.5 * batch) * pace_s >= end)
        if not finishing and now - window_start < report_period_s:
            continue
        # A report drains the queue, so each window counts exactly the steps run inside it. The
        # device idles only while the next batch is launched (microseconds, once a second).
        if in_flight is not None:
            in_flight.fence.wait()
            completed += in_flight.steps
            in_flight = None
            now = clock()
        rate = (completed - window_base) * workload.work_per_step / max(now - window_start, 1e-9)
        if now >= next_check or (finishing and checks == 0):
            errors += workload.check()
            checks += 1
            now = clock()
            next_check = now + check_period_s
        # The next window starts after the check, which is not part of the workload's throughput.
        window_start, window_base = now, completed
        last_boundary = now
        record: dict[str, Any] = {"type": "progress", "t": now - started, "throughput": rate,
                                  "unit": workload.unit, "errors": errors, "checks": checks, "steps": completed}
        if on_report is not None:
            on_report(record)
        emit(record)
        if finishing:
            return {"t": clock() - started, "errors": errors, "checks": checks, "steps": completed}
