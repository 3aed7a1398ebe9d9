"""The background loader: work on a worker thread, the newest answer only, failures said, jobs accounted for."""

from __future__ import annotations

import threading

from desktop.ui.background import Loader, running_jobs
from tests.unit.ui.conftest import gui_stays_responsive
from tests.waits import DEADLINE_S


class Held:
    """Work that blocks until released, then returns its value (or raises)."""

    def __init__(self, value: object, error: Exception | None = None) -> None:
        self.value = value
        self.error = error
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> object:
        self.started.set()
        assert self.release.wait(10)
        if self.error is not None:
            raise self.error
        return self.value


def test_the_answer_lands_on_the_gui_thread_while_it_stays_responsive(qtbot) -> None:
    loader = Loader(name="test")
    held = Held(42)
    answers: list[tuple[object, threading.Thread]] = []
    loader.run(held, lambda value: answers.append((value, threading.current_thread())), answers.append)
    assert loader.busy and held.started.wait(DEADLINE_S)
    assert any(name.startswith("rigscope-test-") for name in running_jobs())
    gui_stays_responsive(qtbot)
    assert answers == []
    held.release.set()
    qtbot.waitUntil(lambda: not loader.busy)
    assert answers == [(42, threading.main_thread())]
    qtbot.waitUntil(lambda: not any(name.startswith("rigscope-test-") for name in running_jobs()))


def test_a_failure_is_handed_over_as_text(qtbot) -> None:
    loader = Loader(name="test")
    held = Held(None, OSError("disk on fire"))
    errors: list[str] = []
    loader.run(held, lambda _: None, errors.append)
    held.release.set()
    qtbot.waitUntil(lambda: not loader.busy)
    assert errors == ["OSError: disk on fire"]


def test_only_the_newest_answer_is_delivered(qtbot) -> None:
    loader = Loader(name="test")
    old, new = Held("old"), Held("new")
    answers: list[object] = []
    loader.run(old, answers.append, answers.append)
    loader.run(new, answers.append, answers.append)
    assert new.started.wait(DEADLINE_S)  # beside the old one
    new.release.set()
    qtbot.waitUntil(lambda: not loader.busy)
    old.release.set()
    qtbot.waitUntil(lambda: not running_jobs())
    qtbot.wait(20)  # the old answer's queued signal has had its chance
    assert answers == ["new"]


def test_one_at_a_time_waits_for_the_running_job_and_skips_the_stale_waiting_one(qtbot) -> None:
    loader = Loader(name="test", one_at_a_time=True)
    first, stale, newest = Held("first"), Held("stale"), Held("newest")
    answers: list[object] = []
    loader.run(first, answers.append, answers.append)
    assert first.started.wait(DEADLINE_S)
    loader.run(stale, answers.append, answers.append)
    loader.run(newest, answers.append, answers.append)
    newest.release.set()
    assert not newest.started.wait(0.2)  # waits for the running one
    first.release.set()
    qtbot.waitUntil(lambda: not loader.busy)
    assert answers == ["newest"] and not stale.started.is_set()


def test_a_discarded_request_is_not_delivered_and_wait_lets_it_end(qtbot) -> None:
    loader = Loader(name="test")
    held = Held("late")
    answers: list[object] = []
    loader.run(held, answers.append, answers.append)
    loader.discard()
    assert not loader.busy
    held.release.set()
    assert loader.wait(DEADLINE_S)
    qtbot.wait(20)
    assert answers == []
