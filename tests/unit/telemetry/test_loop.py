"""``run_every`` on an injected clock: a fixed schedule, missed slots skipped, a prompt stop."""

from __future__ import annotations

import threading

import pytest

from desktop.telemetry.loop import run_every
from tests.waits import DEADLINE_S


class FakeTime:
    """A clock that only ``sleep`` (and a tick's declared cost) moves."""

    def __init__(self, start_s: float = 1000.0) -> None:
        self.now_s = start_s
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now_s += seconds


def test_ticks_on_a_fixed_schedule_without_drift() -> None:
    fake = FakeTime()
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(fake.now_s)
        fake.now_s += 0.3  # each tick costs 0.3 s: the schedule must not slide by it

    done = run_every(1.0, tick, threading.Event(), clock=fake.clock, sleep=fake.sleep, max_ticks=5)
    assert done == 5
    assert ticks == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]
    assert fake.sleeps == pytest.approx([0.7, 0.7, 0.7, 0.7])  # no wait after the last tick


def test_an_overrun_skips_the_missed_slots_instead_of_bursting() -> None:
    fake = FakeTime()
    ticks: list[float] = []
    costs = iter([0.1, 3.5, 0.1, 0.1])

    def tick() -> None:
        ticks.append(fake.now_s)
        fake.now_s += next(costs)

    run_every(1.0, tick, threading.Event(), clock=fake.clock, sleep=fake.sleep, max_ticks=4)
    # The second tick (at 1001) ran until 1004.6: slots 1002, 1003 and 1004 are gone, not made up.
    assert ticks == [1000.0, 1001.0, 1005.0, 1006.0]
    assert all(s > 0.0 for s in fake.sleeps)


def test_an_interval_read_before_each_wait() -> None:
    fake = FakeTime()
    ticks: list[float] = []
    intervals = iter([1.0, 2.0, 2.0])
    run_every(lambda: next(intervals), lambda: ticks.append(fake.now_s), threading.Event(),
              clock=fake.clock, sleep=fake.sleep, max_ticks=4)
    assert ticks == [1000.0, 1001.0, 1003.0, 1005.0]


def test_stop_set_by_a_tick_ends_the_loop_without_waiting() -> None:
    fake = FakeTime()
    stop = threading.Event()
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(fake.now_s)
        if len(ticks) == 3:
            stop.set()

    assert run_every(1.0, tick, stop, clock=fake.clock, sleep=fake.sleep) == 3
    assert ticks == [1000.0, 1001.0, 1002.0]
    assert fake.sleeps == [1.0, 1.0]  # none after the tick that set it, with a sleep of its own too


def test_stop_from_another_thread_ends_a_long_wait_promptly() -> None:
    stop = threading.Event()
    ticked = threading.Event()
    ticks: list[int] = []
    thread = threading.Thread(target=lambda: ticks.append(run_every(3600.0, ticked.set, stop)))
    thread.start()
    assert ticked.wait(DEADLINE_S)  # the loop now waits for the slot an hour ahead
    stop.set()
    thread.join(DEADLINE_S)  # it ended, an hour early: stop woke its wait (no timer on how fast: a busy machine)
    assert not thread.is_alive() and ticks == [1]


def test_a_stop_already_set_ticks_never() -> None:
    stop = threading.Event()
    stop.set()
    assert run_every(1.0, lambda: None, stop) == 0
