"""No usable NVML and no --simulate (issue 32): no GPU at all, NVML tried again on the sample clock, and nothing
simulated written into a history by any write path (the recorder's, the window's), with the events that say so."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from desktop import cli
from desktop.exporter import SnapshotCollector
from desktop.history.store import HistoryStore
from desktop.recorder import SampleSink
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.backend import BackendUnavailable, GpuBackend
from desktop.telemetry.model import DeviceState, Snapshot
from desktop.telemetry.no_gpu import NoGpuBackend, recordable
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu

T0 = 1_800_000_000.0
MISMATCH = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_with_a_version_mismatch_the_recording_backend_has_no_gpu_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml([desktop_gpu()], init_error=MISMATCH).install(monkeypatch)
    backend = open_gpu_backend(fallback="unavailable")
    assert isinstance(backend, NoGpuBackend)
    assert backend.source.unavailable and not backend.source.simulated
    assert "version mismatch" in (backend.source.fallback_reason or "")
    assert backend.devices() == [] and backend.sample(T0) == [] and backend.processes() == []
    # What the window and `sample` get is still the labelled simulated GPU (shown, not recorded).
    shown = open_gpu_backend()
    assert shown.source.fallback_simulation and "version mismatch" in (shown.source.fallback_reason or "")


def test_nvml_is_tried_again_every_period_of_the_sample_clock_and_then_read() -> None:
    fake = FakeNvml([desktop_gpu()], init_error=MISMATCH)
    tries: list[float] = []
    clock = _Clock()

    def opener() -> GpuBackend:
        from desktop.telemetry.nvml import NvmlBackend

        tries.append(clock.now)
        return NvmlBackend.open(fake.module)

    backend = NoGpuBackend("mismatch", opener=opener, retry_period_s=60.0)
    for step in range(0, 60, 5):  # within the first minute: no try at all
        clock.now = T0 + step
        assert backend.sample(clock.now) == []
    assert tries == []
    clock.now = T0 + 60
    assert backend.sample(clock.now) == [] and tries == [T0 + 60]  # still failing: the reason is NVML's
    assert "version mismatch" in (backend.source.fallback_reason or "")
    fake.init_error = None  # the reboot
    clock.now = T0 + 90
    assert backend.sample(clock.now) == [] and tries == [T0 + 60]  # not due yet
    clock.now = T0 + 120
    (reading,) = backend.sample(clock.now)
    assert tries == [T0 + 60, T0 + 120] and reading.state is DeviceState.OK
    assert backend.source.kind == "nvml" and [d.name for d in backend.devices()] == ["NVIDIA GeForce RTX 4090"]
    backend.close()
    assert fake.init_count == 0


def test_a_clock_set_back_does_not_postpone_the_next_try() -> None:
    tries: list[int] = []

    def opener() -> GpuBackend:
        tries.append(1)
        raise BackendUnavailable("still none")

    backend = NoGpuBackend("none", opener=opener, retry_period_s=60.0)
    backend.sample(T0)
    backend.sample(T0 - 3600)  # the machine's time was set back an hour
    assert tries == [1]


def test_an_unforeseen_fault_at_the_retry_costs_only_that_try(caplog: pytest.LogCaptureFixture) -> None:
    """The recorder samples through this: an exception escaping ``sample`` would end the recording."""
    answers: list[object] = [RuntimeError("ctypes: bad symbol"), BackendUnavailable("still none")]

    def opener() -> GpuBackend:
        raise answers.pop(0)  # type: ignore[misc]

    backend = NoGpuBackend("none", opener=opener, retry_period_s=60.0)
    assert backend.sample(T0) == []
    assert backend.sample(T0 + 60) == [] and "RuntimeError: ctypes: bad symbol" in backend.reason
    assert backend.sample(T0 + 120) == [] and backend.reason == "still none" and not answers


def _snapshots(sampler: Sampler, clock: _Clock, n: int) -> list[Snapshot]:
    out = []
    for _ in range(n):
        clock.now += 1.0
        out.append(sampler.tick())
    return out


class _Writer:
    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.events: list[tuple[float, str, str | None, str]] = []

    def submit(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)

    def add_event(self, time_s: float, kind: str, gpu_uuid: str | None, detail: str = "") -> None:
        self.events.append((time_s, kind, gpu_uuid, detail))


def _source_events(writer: _Writer) -> list[str]:
    return [kind for _t, kind, _u, _d in writer.events if kind.startswith("gpu_")]


def test_the_sink_stores_no_gpu_event_once_and_the_gpu_back_with_an_event() -> None:
    fake = FakeNvml([desktop_gpu()], init_error=MISMATCH)
    clock = _Clock()

    def opener() -> GpuBackend:
        from desktop.telemetry.nvml import NvmlBackend

        return NvmlBackend.open(fake.module)

    sampler = Sampler(NoGpuBackend("Driver/library version mismatch", opener=opener, retry_period_s=5.0),
                      clock=clock)
    writer = _Writer()
    sink = SampleSink(writer)
    for snap in _snapshots(sampler, clock, 8):
        sink.submit(snap)
    assert _source_events(writer) == ["gpu_unavailable"]
    assert "version mismatch" in writer.events[0][3] and sink.source.unrecorded is not None
    fake.init_error = None
    for snap in _snapshots(sampler, clock, 6):
        sink.submit(snap)
    assert _source_events(writer) == ["gpu_unavailable", "gpu_available"]
    assert sink.source.unrecorded is None and writer.snapshots[-1].gpus
    sampler.close()


def test_the_windows_fallback_simulation_is_shown_but_only_the_host_is_written(tmp_path: Path) -> None:
    """The window keeps its labelled simulated GPU (no driver) but writes none of it into the user's history."""
    db = tmp_path / "h.sqlite"
    clock = _Clock()
    fallback = SimulatedBackend(parse_profile_list(None), reason="Driver/library version mismatch: reboot")
    sampler = Sampler(fallback, clock=clock)
    sampler.host = _FixedHost()
    session = RecordingSession.open(db)
    try:
        assert session.mode == "recording"
        session.start(sampler)  # the window's sampler thread ticks through the session
        shown = []
        for _ in range(5):
            clock.now += 1.0
            shown.append(session.tick())
        assert all(s.gpus and s.gpus[0].sample is not None for s in shown)  # the window still shows it
        text, tip = session.status_text(time.time())  # the writer's own clock: samples land
        assert text == "Recording the host only" and "simulated" in tip and "version mismatch" in tip
        # The window's alerts of that simulated GPU are shown (its own list), not stored as this machine's.
        gpu_uuid = shown[0].gpus[0].info.uuid
        session.add_event(clock.now, "alert.temperature", "GPU 0 at 88 °C", gpu_uuid)
        session.add_event(clock.now, "alert.ram", "RAM 95 % used")  # the host's: this machine's own
        assert [kind for _t, kind, _m in session.events] == ["alert.temperature", "alert.ram"]
    finally:
        session.close()
    with HistoryStore.open(db, readonly=True) as store:
        counts = store.counts()
        assert counts["gpus"] == 0 and counts["gpu_samples"] == 0 and counts["host_samples"] == 5
        (event,) = store.events(0.0, 4e9, ["gpu_unavailable"])
        assert "version mismatch" in event.detail
        assert [e.kind for e in store.events(0.0, 4e9) if e.kind.startswith("alert.")] == ["alert.ram"]


def test_a_chosen_simulation_is_recorded_as_asked() -> None:
    clock = _Clock()
    sampler = Sampler(SimulatedBackend(parse_profile_list(None)), clock=clock)
    snap = _snapshots(sampler, clock, 1)[0]
    assert recordable(snap) is snap  # --simulate: the user asked for it
    writer = _Writer()
    SampleSink(writer).submit(snap)
    assert writer.snapshots == [snap] and not [e for e in writer.events if e[1] == "gpu_unavailable"]


def _scrape(collector: SnapshotCollector) -> dict[str, float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name == "rigscope_gpus":
                out[sample.labels["state"]] = sample.value
    return out


def test_the_exporter_says_the_gpu_is_unavailable() -> None:
    clock = _Clock()
    sampler = Sampler(NoGpuBackend("No NVIDIA driver found", opener=_never, retry_period_s=60.0), clock=clock)
    collector = SnapshotCollector("rig-01")
    collector.update(_snapshots(sampler, clock, 1)[0])
    assert _scrape(collector) == {"ok": 0.0, "lost": 0.0, "asleep": 0.0, "unavailable": 1.0}


def _never() -> GpuBackend:
    raise BackendUnavailable("No NVIDIA driver found")


class _FixedHost:
    """This machine's host readings (the real psutil backend would do; fixed values keep the counts exact)."""

    def sample(self) -> object:
        from desktop.telemetry.simulated.load import simulated_host_sample

        return simulated_host_sample(12.0)

    def describe(self, processes: object) -> list[object]:
        return list(processes)  # type: ignore[call-overload]


def test_record_run_in_process_with_no_driver_writes_host_rows_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    FakeNvml([desktop_gpu()], init_error=MISMATCH).install(monkeypatch)
    db = tmp_path / "h.sqlite"
    ticks = iter(range(1_000))
    backend = open_gpu_backend(fallback="unavailable")
    sampler = Sampler(backend, _FixedHost(), clock=lambda: T0 + next(ticks))  # type: ignore[arg-type]
    session = RecordingSession.open(db, strict=True, calibrate=sampler.effective_load.calibrate_all)
    said: list[str] = []
    try:
        session.record(sampler, threading.Event(), interval_s=0.0, report=said.append, max_ticks=6)
    finally:
        session.close(say_loss=False)
        sampler.close()
    with HistoryStore.open(db, readonly=True) as store:
        counts = store.counts()
    assert counts["gpu_samples"] == 0 and counts["gpus"] == 0 and counts["host_samples"] == 6
    assert not said  # the first line of `record` says it; nothing changed while it ran
    # `advise` on that history says why it holds no GPU (one line, exit 2), not "record some".
    assert cli.main(["advise", "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds no GPU samples" in err and "version mismatch" in err, err
