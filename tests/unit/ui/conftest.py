"""UI test fixtures: fail a test that leaves a QThread, a background job or a QTimer running; build the app
on a simulated GPU."""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QThread, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from desktop.config import Settings
from desktop.sessions.recording import RecordingSession
from desktop.telemetry.model import Snapshot
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SharedLoads, SimulatedBackend, parse_profile_list
from desktop.ui.app import RigscopeApp
from desktop.ui.background import running_jobs

#: A background job (history read, advice, service change) may still finish after its test's last
#: assertion; one still running after this long is stuck, e.g. on an event the test never set.
JOB_GRACE_S = 5.0

_HARMLESS_QT_WARNINGS = (
    "This plugin does not support propagateSizeHints",
    "This plugin does not support raise",
    "No such signal QPlatformNativeInterface::systemTrayWindowChanged",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Offscreen-platform warnings that are harmless and not ours: size hints, and the tray icon
    that tests create although no tray host exists (availability is injected)."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.qt_log_ignore(*_HARMLESS_QT_WARNINGS))


def _describe(obj: QThread | QTimer) -> str:
    if isinstance(obj, QThread):
        return f"QThread {obj.objectName() or type(obj).__name__}"
    parent = obj.parent()
    return f"QTimer ({obj.interval()} ms, parent {type(parent).__name__ if parent else None})"


def _running(obj: object) -> bool:
    try:
        return (isinstance(obj, QThread) and obj.isRunning()) or (isinstance(obj, QTimer) and obj.isActive())
    except RuntimeError:  # the C++ object is already deleted: not running
        return False


def _qt_objects() -> list[object]:
    """Every live QThread and QTimer. ``isinstance`` on every object the collector knows asks some for
    their ``__class__``: torch's deprecated ``reduce_op`` warns then, once an earlier test imported torch."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [o for o in gc.get_objects() if isinstance(o, QThread | QTimer)]


@pytest.fixture(autouse=True)
def _no_running_qthreads_or_qtimers(qapp: QApplication) -> Iterator[None]:
    """Fail a test that leaves a QThread, a background job (``desktop.ui.background.Loader``) or an
    active QTimer behind (after its widgets closed)."""
    before = {id(o) for o in _qt_objects()}
    jobs_before = set(running_jobs())
    yield
    deadline = time.monotonic() + JOB_GRACE_S
    while set(running_jobs()) - jobs_before and time.monotonic() < deadline:
        qapp.processEvents()
        time.sleep(0.005)
    qapp.processEvents()
    jobs = sorted(set(running_jobs()) - jobs_before)
    still = [o for o in _qt_objects() if id(o) not in before and _running(o)]
    names = [_describe(o) for o in still]
    for obj in still:  # stop them so that one leak does not cascade into every later test
        if isinstance(obj, QThread):
            obj.quit()
            obj.wait(2000)
        else:
            obj.stop()
    assert not still, f"test left Qt threads/timers running: {names}"
    assert not jobs, f"test left background jobs running: {jobs}"


@pytest.fixture(autouse=True)
def _registered_widgets_live_until_closed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold every widget given to ``qtbot.addWidget`` until pytest-qt has closed it.

    pytest-qt keeps only a weak reference. Once a test returns, a page kept alive by nothing but
    its own reference cycles (signal slots, pyqtgraph's items) dies whenever the collector runs, and
    pytest-qt's ``processEvents`` right after the test paints it: a collection triggered inside a
    Python ``paint()`` override then deleted the very view being painted, and the whole run died with
    a segfault in ``GraphicsView.paintEvent`` (seen in CI). Held here, the widget is closed and
    deleted by pytest-qt's teardown first, then let go.
    """
    if "qtbot" not in request.fixturenames:
        yield
        return
    qtbot = request.getfixturevalue("qtbot")
    held: list[QWidget] = []
    register = qtbot.addWidget

    def add_and_hold(widget: QWidget, *, before_close_func: Callable[[QWidget], None] | None = None) -> None:
        held.append(widget)
        register(widget, before_close_func=before_close_func)

    qtbot.addWidget = qtbot.add_widget = add_and_hold
    yield
    held.clear()


def gui_stays_responsive(qtbot: Any) -> None:
    """The GUI thread still runs its event loop: a timer started now fires (while a test holds a job)."""
    fired: list[bool] = []
    QTimer.singleShot(10, lambda: fired.append(True))
    qtbot.waitUntil(lambda: bool(fired), timeout=2000)


class FakeClock:
    """Simulated wall time: each ``tick`` of the helper advances it by ``step_s``."""

    def __init__(self, start_s: float = 1_790_000_000.0, step_s: float = 1.0, auto: bool = False) -> None:
        self.now_s = start_s
        self.step_s = step_s
        #: Advance on every read: for the real sampler thread, one read per tick.
        self.auto = auto

    def __call__(self) -> float:
        if self.auto:
            self.now_s += self.step_s
        return self.now_s

    def monotonic(self) -> float:
        return self.now_s - 1_790_000_000.0


class FakeWriter:
    """Stands in for HistoryWriter: remembers what it was given (submit runs on the sampler thread)."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.events: list[tuple[Any, ...]] = []
        self.closed = False
        self.status = None
        self.calls: list[Callable[[Any], Any]] = []

    def submit(self, snap: Snapshot) -> None:
        self.snapshots.append(snap)

    def add_event(self, *args: Any) -> None:
        self.events.append(args)

    def call(self, fn: Callable[[Any], Any]) -> Future[Any]:
        """The recording's tick hands its rollups and calibration reads in here: remembered, not run (no store)."""
        self.calls.append(fn)
        future: Future[Any] = Future()
        future.set_result({})
        return future

    def close(self) -> None:
        self.closed = True


class Harness:
    """A RigscopeApp on simulated GPUs with a fake clock; ``tick()`` feeds one snapshot synchronously."""

    def __init__(self, app: RigscopeApp, backend: SimulatedBackend, clock: FakeClock) -> None:
        self.app = app
        self.backend = backend
        self.clock = clock

    def tick(self, n: int = 1) -> Snapshot:
        snap = None
        for _ in range(n):
            self.clock.now_s += self.clock.step_s
            snap = self.app.recording.tick()  # the sampler thread's one tick, here on the test's thread
            self.app.on_snapshot(snap)
        assert snap is not None
        return snap


@pytest.fixture
def make_app(qtbot: Any, tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[RigscopeApp] = []

    def build(profiles: str = "rtx4090-laptop", *, settings: Settings | None = None, tray: bool = False,
              recording: RecordingSession | None = None, clock: FakeClock | None = None,
              end_process: Callable[[int, float | None], str | None] | None = None,
              shared: bool = False) -> Harness:
        clock = clock or FakeClock()
        # shared: the window's simulated GPU is this user's one simulated machine, as `open_gpu_backend` opens it.
        backend = SimulatedBackend(parse_profile_list(profiles), user="me",
                                   shared=SharedLoads(min_period_s=0.0) if shared else None)
        sampler = Sampler(backend, None, clock=clock, monotonic=clock.monotonic, process_period_s=0.0)
        qapp = QApplication.instance()
        assert isinstance(qapp, QApplication)
        rec = recording or RecordingSession("recording", "test writer", writer=FakeWriter())
        app = RigscopeApp(qapp, sampler, settings or Settings(), rec, settings_path=tmp_path / "settings.toml",
                          tray_available=tray, end_process=end_process, service=lambda enable: None)
        app.window.resize(1600, 1000)
        qtbot.addWidget(app.window)
        made.append(app)
        return Harness(app, backend, clock)

    yield build
    for app in made:
        app.shutdown()
