"""Child process for tests/bench/test_bench_ui.py: one measurement per run, printed as one JSON line.

Modes (argv[1]), each with the number of simulated GPUs (argv[2]):
  cold-app   the real app: interpreter start -> first paint of the dashboard's plots
  cold-bare  bare PySide6 + pyqtgraph: a window with the same number of empty plots, first paint
  repaint    one dashboard repaint over full 1 h ring buffers, against a bare layout's setData
  idle       the real app sampling at 1 Hz (recording to a temporary database) for argv[3] s: CPU
  rss        resident memory after 600 ticks of 1 Hz data fed quickly (10 accelerated minutes)
Offscreen, 1600x1000. Times are wall-clock from the parent's launch stamp (argv[-1]).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
SIZE = (1600, 1000)
PLOTS_PER_GPU = 6


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class _FirstPaint:
    """Records the wall time of the first Paint event on a widget's viewport."""

    def __init__(self, widget: object) -> None:
        from PySide6.QtCore import QEvent, QObject

        self.at: float | None = None

        class Filter(QObject):
            def eventFilter(inner, obj: object, event: QEvent) -> bool:
                if event.type() == QEvent.Type.Paint and self.at is None:
                    self.at = time.time()
                return False

        self._filter = Filter()
        widget.viewport().installEventFilter(self._filter)  # type: ignore[attr-defined]


def _app(gpus: int, recording: object | None = None, clock: object | None = None):  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QApplication

    from desktop.config import Settings
    from desktop.sessions.recording import RecordingSession
    from desktop.telemetry.sampler import Sampler
    from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
    from desktop.ui.app import RigscopeApp

    qt_app = QApplication.instance() or QApplication([])
    backend = SimulatedBackend(parse_profile_list(",".join((["rtx4090-laptop", "rtx4090"] * 4)[:gpus])))
    for i in range(gpus):
        backend.manual.set(i, 0.9, 6000.0)
    kwargs = {"clock": clock, "monotonic": clock} if clock is not None else {}
    sampler = Sampler(backend, None, **kwargs)
    app = RigscopeApp(qt_app, sampler, Settings(), recording or RecordingSession("off", "bench"), tray_available=False)
    app.window.resize(*SIZE)
    return qt_app, app


def cold_app(gpus: int) -> dict[str, float]:
    qt_app, app = _app(gpus)
    app.window.show()
    app.on_snapshot(app.sampler.tick())  # the dashboard builds its panels on the first reading
    first = _FirstPaint(app.dashboard.panels[0].plots)
    app.dashboard.repaint_plots()
    while first.at is None:
        qt_app.processEvents()
    app.shutdown()
    return {"first_paint_at": first.at}


def cold_bare(gpus: int) -> dict[str, float]:
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication, QHBoxLayout, QMainWindow, QWidget

    qt_app = QApplication([])
    window = QMainWindow()
    central = QWidget()
    row = QHBoxLayout(central)
    layouts = []
    for _ in range(gpus):
        layout = pg.GraphicsLayoutWidget()
        for r in range(PLOTS_PER_GPU):
            layout.addPlot(row=r, col=0)
        row.addWidget(layout)
        layouts.append(layout)
    window.setCentralWidget(central)
    window.resize(*SIZE)
    first = _FirstPaint(layouts[0])
    window.show()
    while first.at is None:
        qt_app.processEvents()
    return {"first_paint_at": first.at}


def repaint(gpus: int) -> dict[str, float]:
    """Median ms of one repaint: the app's dashboard vs a bare layout with setData (same points)."""
    import numpy as np
    import pyqtgraph as pg
    from PySide6.QtWidgets import QHBoxLayout, QMainWindow, QWidget

    qt_app, app = _app(gpus)
    app.window.show()
    app.on_snapshot(app.sampler.tick())
    dash = app.dashboard
    dash.set_window("1 h")
    rng = np.random.default_rng(0)
    t0 = 1_790_000_000.0
    for panel in dash.panels.values():
        panel.ring.clear()
        for i in range(3600):
            panel.ring.append(t0 + i, {"utilization_gpu_pct": rng.uniform(0, 100), "utilization_mem_pct": 40.0,
                                       "vram_used_mib": 6000.0, "temperature_c": 70 + rng.uniform(0, 10),
                                       "power_w": 100 + rng.uniform(0, 40), "sm_clock_mhz": 1900.0,
                                       "clock_event_reasons": 4.0 if i % 100 < 30 else 0.0})
    dash.latest_s = t0 + 3599
    dash.repaint_plots()
    qt_app.processEvents()
    app_ms = []
    for k in range(30):
        for panel in dash.panels.values():  # one new sample per GPU, as a snapshot brings
            panel.ring.append(t0 + 3600 + k, {"utilization_gpu_pct": 50.0, "temperature_c": 75.0})
            # Measure a frame that does change: without this, a 1 s step in a 1 h window
            # (under a pixel) would be skipped and only the unchanged scene repainted.
            panel.painted_end_s = None
            panel.view_end_s = None  # and one that moves the x range (the lead would skip most moves)
        dash.latest_s = t0 + 3600 + k
        start = time.perf_counter()
        dash.repaint_plots()
        for panel in dash.panels.values():
            panel.plots.viewport().repaint()
        app_ms.append((time.perf_counter() - start) * 1000)
    app.shutdown()

    window = QMainWindow()
    central = QWidget()
    row = QHBoxLayout(central)
    curves = []
    layouts = []
    for _ in range(gpus):
        layout = pg.GraphicsLayoutWidget()
        for r in range(PLOTS_PER_GPU):
            curves.append(layout.addPlot(row=r, col=0).plot())
        row.addWidget(layout)
        layouts.append(layout)
    window.setCentralWidget(central)
    window.resize(*SIZE)
    window.show()
    x = t0 + np.arange(3600, dtype=np.float64)
    ys = [rng.uniform(0, 100, 3600) for _ in curves]
    qt_app.processEvents()
    bare_ms = []
    for k in range(30):
        start = time.perf_counter()
        for curve, y in zip(curves, ys, strict=True):
            curve.setData(x + k, y)
        for layout in layouts:
            layout.viewport().repaint()
        bare_ms.append((time.perf_counter() - start) * 1000)
    return {"app_ms": statistics.median(app_ms), "bare_ms": statistics.median(bare_ms)}


def idle(gpus: int, seconds: float) -> dict[str, float]:
    from desktop.sessions.recording import RecordingSession

    with tempfile.TemporaryDirectory() as tmp:
        recording = RecordingSession.open(Path(tmp) / "history.sqlite")
        qt_app, app = _app(gpus, recording)
        app.sampling.set_interval(1.0)
        app.start()
        end = time.monotonic() + 5.0
        while time.monotonic() < end:  # settle: first paints, imports, caches
            qt_app.processEvents()
            time.sleep(0.02)
        from PySide6.QtCore import QEventLoop, QTimer

        cpu0, wall0 = time.process_time(), time.monotonic()
        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()  # the real event loop, as the user's window runs
        cpu_s, wall_s = time.process_time() - cpu0, time.monotonic() - wall0
        ticks = app.sampling.ticks
        repaints = app.dashboard.repaints
        app.shutdown()
    return {"cpu_pct": 100.0 * cpu_s / wall_s, "wall_s": wall_s, "ticks": ticks, "repaints": repaints}


def rss(gpus: int) -> dict[str, float]:
    class Clock:
        now = 1_790_000_000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    with tempfile.TemporaryDirectory() as tmp:
        from desktop.sessions.recording import RecordingSession

        recording = RecordingSession.open(Path(tmp) / "history.sqlite")
        qt_app, app = _app(gpus, recording, clock)
        app.window.show()
        for i in range(600):
            clock.now += 1.0
            snap = recording.tick()  # the sampler thread's tick
            app.on_snapshot(snap)
            if i % 2 == 0:
                app.dashboard.repaint_plots()
                qt_app.processEvents()
        if recording.writer is not None:
            recording.writer.flush(timeout_s=30)
        value = _rss_mib()
        app.shutdown()
    return {"rss_mib": value}


def main() -> None:
    mode, gpus = sys.argv[1], int(sys.argv[2])
    if mode == "cold-app":
        out = cold_app(gpus)
    elif mode == "cold-bare":
        out = cold_bare(gpus)
    elif mode == "repaint":
        out = repaint(gpus)
    elif mode == "idle":
        out = idle(gpus, float(sys.argv[3]))
    elif mode == "rss":
        out = rss(gpus)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
