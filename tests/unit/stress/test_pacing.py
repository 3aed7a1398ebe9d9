"""The workload loop on a fake asynchronous GPU and an injected clock: steady reports, an on-time end."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest

from desktop.stress.pacing import BATCH_TARGET_S, Fence, drive


class FakeGpu:
    """A GPU that runs queued steps one after another; launching is nearly free until ~1000 are queued.

    Like CUDA: ``step()`` returns at once while the queue has room, ``check()`` (a copy to the
    host) waits for everything queued, and a fence's ``wait()`` for what was queued before it.
    """

    unit = "steps/s"
    work_per_step = 1.0

    def __init__(self, step_s: float, launch_s: float = 20e-6, queue_limit: int = 1024) -> None:
        self.t = 0.0
        self.step_s, self.launch_s, self.queue_limit = step_s, launch_s, queue_limit
        self.busy_until = 0.0
        self.queue: deque[float] = deque()  # completion times of queued steps
        self.max_backlog_s = 0.0
        self.finished_steps = 0

    def now(self) -> float:
        return self.t

    def _retire(self) -> None:
        while self.queue and self.queue[0] <= self.t:
            self.queue.popleft()
            self.finished_steps += 1

    def step(self) -> None:
        self.t += self.launch_s
        self._retire()
        if len(self.queue) >= self.queue_limit:
            self.t = self.queue[0]
            self._retire()
        self.busy_until = max(self.t, self.busy_until) + self.step_s
        self.queue.append(self.busy_until)
        self.max_backlog_s = max(self.max_backlog_s, self.busy_until - self.t)

    def fence(self) -> Fence:
        gpu, done_at = self, self.busy_until

        class _Event:
            def wait(self) -> None:
                gpu.t = max(gpu.t, done_at)
                gpu._retire()

        return _Event()

    def check(self) -> int:
        self.t = max(self.t, self.busy_until)
        self._retire()
        return 0


def run(gpu: FakeGpu, seconds: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    records: list[dict[str, Any]] = []
    done = drive(gpu, seconds, records.append, fence=gpu.fence, clock=gpu.now)
    return records, done


@pytest.mark.parametrize("step_s", [0.001, 0.05, 0.3])
def test_reports_come_about_once_a_second_and_the_run_ends_on_time(step_s: float) -> None:
    gpu = FakeGpu(step_s)
    records, done = run(gpu, 20.0)
    times = [r["t"] for r in records]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    # A report at the first batch boundary after a second (a check drains the queue: one step more).
    assert all(gap <= 1.0 + 2 * BATCH_TARGET_S + 2 * step_s for gap in gaps), gaps
    assert len(records) >= 20 / (1.0 + 2 * BATCH_TARGET_S + 2 * step_s)
    assert abs(done["t"] - 20.0) <= max(2 * BATCH_TARGET_S, step_s)
    # Never more than about two batches queued: the old loop let ~1000 launches pile up.
    assert gpu.max_backlog_s <= 4 * BATCH_TARGET_S + 2 * step_s
    # Counts are exact: every step counted finished, and each report's rate is the device's pace.
    assert not gpu.queue and done["steps"] == gpu.finished_steps
    for record in records[1:-1]:
        assert record["throughput"] == pytest.approx(1.0 / step_s, rel=0.25)


def test_a_step_longer_than_a_second_reports_every_step_and_ends_within_one() -> None:
    gpu = FakeGpu(2.5)
    records, done = run(gpu, 20.0)
    times = [r["t"] for r in records]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    # Once the pace is known, a slow batch is finished before the next is queued: a report a step.
    assert gaps[0] <= 2 * 2.5 + 0.01 and all(gap <= 2.5 + 0.01 for gap in gaps[1:]), gaps
    assert abs(done["t"] - 20.0) <= 2.5
    assert gpu.max_backlog_s <= 2 * 2.5 + 1e-9


def test_a_synchronous_device_without_fences_ends_on_time() -> None:
    class Cpu:
        unit = "steps/s"
        work_per_step = 1.0

        def __init__(self) -> None:
            self.t = 0.0
            self.steps = 0

        def step(self) -> None:
            self.t += 0.04
            self.steps += 1

        def check(self) -> int:
            self.t += 0.01
            return 0

    cpu = Cpu()
    records: list[dict[str, Any]] = []
    done = drive(cpu, 5.0, records.append, clock=lambda: cpu.t)
    assert abs(done["t"] - 5.0) <= 0.15
    assert done["steps"] == cpu.steps and done["checks"] >= 2
    assert records[-1]["steps"] == done["steps"]
    assert all(r["throughput"] == pytest.approx(25.0, rel=0.3) for r in records)
