"""The recorder writes the laptop's power envelope changes as history events (kind envelope.<what>)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from desktop.history.store import HistoryStore
from desktop.history.writer import HistoryWriter
from desktop.recorder import Recorder
from desktop.telemetry.envelope import EnvelopeWatch
from desktop.telemetry.model import Snapshot, SourceInfo
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list

T0 = 1_790_000_000.0


def test_unplugging_and_stopping_powerd_become_events(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    clock = [T0]
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=1)
    (info,) = backend.devices()
    sampler = Sampler(backend, clock=lambda: clock[0])
    writer = HistoryWriter(path)
    writer.start()
    try:
        recorder = Recorder(sampler, writer, clock=lambda: clock[0], maintenance_period_s=1e9)
        recorder.step()
        clock[0] += 1
        recorder.step()  # nothing changed: no event
        backend.machine.set_envelope(on_ac=False)
        clock[0] += 1
        recorder.step()
        backend.machine.set_envelope(on_ac=True, powerd_running=False, shift_mode="turbo")
        clock[0] += 1
        recorder.step()
        writer.flush()
    finally:
        writer.close()
    with HistoryStore.open(path) as store:
        events = [(e.time_s - T0, e.kind, e.gpu_uuid, e.detail) for e in store.events(T0 - 1, T0 + 10)]
    envelope = [e for e in events if e[1].startswith("envelope.")]
    assert envelope == [
        (0.0, "envelope.state", None, "on AC power; firmware mode Balanced; nvidia-powerd running"),
        (0.0, "envelope.limit", info.uuid, "capped at 150 W of 175 W: firmware mode Balanced"),
        (2.0, "envelope.ac", None, "on battery"),
        (2.0, "envelope.limit", info.uuid, "capped at 56 W of 175 W: on battery"),
        (3.0, "envelope.ac", None, "on AC power"),
        (3.0, "envelope.powerd", None, "nvidia-powerd stopped"),
        (3.0, "envelope.mode", None, "firmware mode Extreme Performance"),
        (3.0, "envelope.limit", info.uuid,
         "capped at 150 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off"),
    ]


def test_no_envelope_no_events() -> None:
    watch = EnvelopeWatch()
    snap = Snapshot(time_s=T0, monotonic_s=0.0, source=SourceInfo("simulated", "x"), gpus=())
    assert watch.events(snap) == []


class _Writer:
    """What the window's tick needs of a writer: it keeps the events, runs nothing it is handed (no store)."""

    status = None

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str | None, str]] = []

    def call(self, _fn: Callable[[Any], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(None)
        return future

    def submit(self, _snap: Snapshot) -> None:
        pass

    def add_event(self, time_s: float, kind: str, gpu_uuid: str | None, detail: str = "") -> None:
        self.events.append((time_s, kind, gpu_uuid, detail))


def test_the_window_recording_writes_them_too() -> None:
    from desktop.sessions.recording import RecordingSession

    writer = _Writer()
    recording = RecordingSession(mode="recording", detail="", writer=writer)
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=1)
    clock = [T0]
    sampler = Sampler(backend, clock=lambda: clock[0])
    recording.start(sampler)  # the window's tick
    recording.tick()
    backend.machine.set_envelope(shift_mode="eco")
    clock[0] += 1
    recording.tick()
    kinds = [e[1] for e in writer.events]
    assert kinds == ["envelope.state", "envelope.limit", "envelope.mode", "envelope.limit"]
    assert writer.events[-1][3] == "capped at 80 W of 175 W: firmware mode Eco"


def test_rigscope_run_writes_them_when_it_holds_the_history(tmp_path: Path) -> None:
    from desktop.jobs.job_history import JobHistory

    path = tmp_path / "h.sqlite"
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), ManualLoad(), seed=1)
    clock = [T0]
    sampler = Sampler(backend, clock=lambda: clock[0])
    history = JobHistory(path)
    history.open()
    try:
        assert history.writer is not None  # no recorder: the job writes the history itself
        history.submit(sampler.tick())
        backend.machine.set_envelope(powerd_running=False, shift_mode="turbo")
        clock[0] += 1
        history.submit(sampler.tick())
        history.flush()
    finally:
        history.close()
    with HistoryStore.open(path) as store:
        lines = [e.detail for e in store.events(T0 - 1, T0 + 10) if e.kind == "envelope.limit"]
    assert lines == ["capped at 150 W of 175 W: firmware mode Balanced",
                     "capped at 150 W of 175 W: nvidia-powerd is not running, so Dynamic Boost is off"]
