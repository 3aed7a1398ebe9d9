"""The window with no usable driver (issue 32): it shows its labelled simulated GPU, but writes only the host into
the user's history and says so in the status bar. Real widgets (offscreen), a real history file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication

from desktop.config import Settings
from desktop.history.store import HistoryStore
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from desktop.ui.app import RigscopeApp
from tests.unit.ui.conftest import FakeClock

REASON = "Driver/library version mismatch: the NVIDIA driver was upgraded but the old kernel module is still loaded"


def test_the_window_shows_the_fallback_simulation_and_records_only_the_host(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    clock = FakeClock()
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"), user="me", reason=REASON)
    sampler = Sampler(backend, _Host(), clock=clock, monotonic=clock.monotonic, process_period_s=0.0)
    recording = RecordingSession.open(db)
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication) and recording.mode == "recording"
    app = RigscopeApp(qapp, sampler, Settings(), recording, settings_path=tmp_path / "settings.toml",
                      tray_available=False, service=lambda enable: None)
    qtbot.addWidget(app.window)
    try:
        for _ in range(4):
            clock.now_s += 1.0
            snap = app.recording.tick()  # the sampler thread's tick
            app.on_snapshot(snap)
        assert app.last_snapshot is not None and app.last_snapshot.gpus  # the Dashboard still has its GPU
        assert app.window.source_label.text().startswith("Source: simulated GPU: Driver/library version mismatch")
        assert app.window.recording_label.text() == "Recording the host only"
        assert "no GPU recorded" in app.window.recording_label.toolTip()
    finally:
        app.shutdown()
    with HistoryStore.open(db, readonly=True) as store:
        counts = store.counts()
        assert counts["gpus"] == 0 and counts["gpu_samples"] == 0 and counts["host_samples"] == 4
        assert [e.kind for e in store.events(0.0, 4e9, ["gpu_unavailable"])] == ["gpu_unavailable"]


class _Host:
    """This machine's host readings, fixed (psutil's would do; fixed keeps the test the same on any machine)."""

    def sample(self) -> Any:
        from desktop.telemetry.simulated import simulated_host_sample

        return simulated_host_sample(20.0)

    def describe(self, processes: Any) -> list[Any]:
        return list(processes)
