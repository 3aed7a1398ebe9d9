"""`JobSession` driven as a library, without the command line or Qt: the whole `rigscope run` sequence on the
simulated GPU with a real wrapped job, its callbacks, the exit code, the stored card and the run record."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from desktop import config
from desktop.errors import UserError
from desktop.history.store import HistoryStore
from desktop.jobs.job import JobRun
from desktop.sessions.job import SIMULATED_LOAD_NOTE, JobSession
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the wrapped job's process group")


class _Backend(SimulatedBackend):
    """The simulated GPU, which remembers being closed."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


def _backend() -> _Backend:
    _Backend.closed = 0
    return _Backend(parse_profile_list("rtx4090-laptop"))


def _session(tmp_path: Path, argv: list[str], log: list[tuple[str, str]], **kwargs: object) -> JobSession:
    return JobSession(argv, _backend(), tmp_path / "h.sqlite", config.Settings(), interval_s=0.2,
                      chose_simulated=True, say=lambda m: log.append(("say", m)),
                      show_card=lambda c: log.append(("card", c)), **kwargs)  # type: ignore[arg-type]


def test_the_session_runs_the_job_and_hands_back_its_exit_code_card_and_record(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    output = tmp_path / "job.json"
    session = _session(tmp_path, [sys.executable, "-c", "import sys, time; time.sleep(0.6); sys.exit(7)"], log,
                       name="seven", output=output, price_per_hour=0.5)
    started: list[JobRun] = []

    def on_started(run: JobRun) -> object:
        started.append(run)
        log.append(("started", run.record.name))
        return lambda: log.append(("ended", ""))

    assert session.run(on_started=on_started) == 7  # type: ignore[arg-type]
    kinds = [kind for kind, _ in log]
    # The job's end comes before the card (the CLI's signal handlers are back by then), the card once.
    assert kinds.index("started") < kinds.index("ended") < kinds.index("card") and kinds.count("card") == 1
    card_text = next(text for kind, text in log if kind == "card")
    assert "seven" in card_text and SIMULATED_LOAD_NOTE.split(":")[0] in card_text
    assert not any(kind == "say" and "no NVIDIA GPU" in text for kind, text in log)  # the simulated GPU was asked for
    with HistoryStore.open(tmp_path / "h.sqlite", readonly=True) as store:
        (record,) = store.jobs()
    assert record.name == "seven" and record.exit_code == 7 and record.card is not None
    assert record.job_id == started[0].record.job_id
    written = json.loads(output.read_text())  # the portable run record, with the price handed in
    assert written["kind"] == "job" and written["price_per_hour"] == 0.5 and written["currency"] == "USD"
    assert _Backend.closed >= 1  # the session closes the backend it was handed (through the sampler)


def test_a_gpu_that_is_not_there_is_refused_before_anything_runs(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    session = _session(tmp_path, [sys.executable, "-c", "pass"], log, gpu_index=3)
    with pytest.raises(UserError, match=r"--gpu 3: there is no such GPU here \(GPUs: 0\)"):
        session.run()
    assert _Backend.closed == 1 and session.job is None and not log
    assert not (tmp_path / "h.sqlite").exists()


def test_a_guard_below_the_gpus_temperature_is_a_user_error_and_the_history_is_closed(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    session = _session(tmp_path, [sys.executable, "-c", "pass"], log, guard_c=20.0)
    with pytest.raises(UserError, match="below room temperature"):
        session.run()
    assert _Backend.closed == 1 and session.job is None and session.history is None
    with HistoryStore.open(tmp_path / "h.sqlite", readonly=True) as store:  # opened, and closed again
        assert store.jobs() == []


def test_a_command_that_cannot_start_is_said_like_a_shell_says_it(tmp_path: Path) -> None:
    log: list[tuple[str, str]] = []
    session = _session(tmp_path, [str(tmp_path / "no-such-program")], log)
    called: list[JobRun] = []
    with pytest.raises(UserError, match=r"cannot run '.*no-such-program'"):
        session.run(on_started=lambda run: called.append(run) or (lambda: None))  # type: ignore[func-returns-value]
    assert not called and not any(kind == "card" for kind, _ in log)


def test_no_command_is_a_user_error() -> None:
    with pytest.raises(UserError, match="what should it run"):
        JobSession([], _backend(), Path("unused.sqlite"), config.Settings())


def test_no_driver_and_no_simulate_refuses_the_job_before_anything_is_written(tmp_path: Path) -> None:
    """Issue 32: it used to say "watching the simulated GPU" and write that simulated machine into the history."""
    log: list[tuple[str, str]] = []
    fallback = SimulatedBackend(parse_profile_list(None), reason="Driver/library version mismatch: reboot")
    session = JobSession([sys.executable, "-c", "pass"], fallback, tmp_path / "h.sqlite", config.Settings(),
                         interval_s=0.2, say=lambda m: log.append(("say", m)))
    with pytest.raises(UserError, match=r"no NVIDIA GPU answers here \(Driver/library version mismatch: reboot\)"
                                        r".*--simulate"):
        session.run()
    assert session.job is None and not log
    assert not (tmp_path / "h.sqlite").exists()  # nothing simulated reached the history
