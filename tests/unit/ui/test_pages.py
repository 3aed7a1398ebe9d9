"""Every page behind one ``Page`` protocol: the window calls its theme, shown/hidden and refresh directly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from PySide6.QtWidgets import QLabel

from desktop.ui.pages.base import Page, PageWidget
from desktop.ui.theme import DARK, LIGHT, Theme

PAGE_METHODS = ("apply_theme", "page_shown", "page_hidden", "refresh")


class CallsPage(PageWidget):
    """A page that writes down what the window asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def apply_theme(self, theme: Theme) -> None:
        self.calls.append(f"apply_theme:{theme.name}")

    def page_shown(self) -> None:
        self.calls.append("page_shown")

    def page_hidden(self) -> None:
        self.calls.append("page_hidden")

    def refresh(self) -> None:
        self.calls.append("refresh")


def test_every_registered_page_implements_the_page_protocol(make_app):
    h = make_app()
    w = h.app.window
    assert w.page_keys() == ["dashboard", "processes", "stress", "advisor", "costs", "history", "jobs", "fleet",
                             "settings"]
    for key in w.page_keys():
        page = w.page(key)  # built if lazy
        assert isinstance(page, PageWidget), key
        assert isinstance(page, Page), key
        for name in PAGE_METHODS:
            assert callable(getattr(page, name)), (key, name)
        page.apply_theme(LIGHT)  # the base's defaults and each page's own: none needs more than the theme
        page.page_hidden()


def test_the_page_base_has_every_method_of_the_protocol():
    members = {name for name in vars(Page) if not name.startswith("_")}
    assert members == set(PAGE_METHODS)
    assert all(name in vars(PageWidget) for name in PAGE_METHODS)


def test_a_widget_that_is_no_page_is_refused(make_app):
    h = make_app()
    w = h.app.window
    with pytest.raises(TypeError, match="not a PageWidget"):
        w.add_page("label", "Label", QLabel("not a page"))  # type: ignore[arg-type]
    assert "label" not in w.page_keys()
    w.add_page("lazy-label", "Lazy label", lambda: QLabel("not a page"))  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="'lazy-label'"):
        w.page("lazy-label")


def test_the_window_calls_each_page_method_directly(make_app):
    h = make_app()
    w = h.app.window
    eager, lazy = CallsPage(), CallsPage()
    w.add_page("eager", "Eager", eager)
    w.add_page("lazy", "Lazy", lambda: lazy)
    assert eager.calls == [] and lazy.calls == []
    w.show_page("eager")
    assert eager.calls == ["page_shown"]
    w.show_page("lazy")  # built: themed at once, then shown
    assert eager.calls == ["page_shown", "page_hidden"]
    assert lazy.calls == [f"apply_theme:{w.theme.name}", "page_shown"]
    theme = LIGHT if w.theme.name == DARK.name else DARK
    w.apply_theme(theme)
    assert eager.calls[-1] == lazy.calls[-1] == f"apply_theme:{theme.name}"


def test_showing_another_history_refreshes_the_built_history_pages(make_app, tmp_path):
    h = make_app()
    w = h.app.window
    advisor = w.page("advisor")
    calls: list[str] = []
    advisor.refresh = lambda: calls.append("advisor")  # type: ignore[method-assign]
    h.app.show_history(h.app.db_path)
    assert calls == ["advisor"]
    assert not w.is_built("costs") and not w.is_built("history")  # an unbuilt page reads when first shown


def test_the_processes_page_is_built_after_the_first_snapshot_and_keeps_it(make_app):
    """The first frame does not wait for the Processes page: the second snapshot builds it, fed the first."""
    h = make_app()
    h.backend.manual.set(0, 0.9, 6000.0)  # a load, with its process
    w = h.app.window
    first = h.tick()
    assert first.processes and not w.is_built("processes")
    second = h.tick()
    assert w.is_built("processes")
    proc = second.processes[0]
    times, _sm, _mem = h.app.processes.history.series(proc.pid, proc.gpu_index)
    assert times.tolist() == [first.time_s, second.time_s]


def test_the_processes_page_shown_before_the_second_snapshot_shows_the_first(make_app):
    h = make_app()
    h.backend.manual.set(0, 0.9, 6000.0)
    first = h.tick()
    h.app.window.show_page("processes")
    page = h.app.processes
    assert h.app.window.stack.currentWidget() is page
    assert page.model.rowCount() == len(first.processes) > 0
    h.tick()  # fed once, not twice: the page keeps its one history per process
    proc = first.processes[0]
    assert page.history.series(proc.pid, proc.gpu_index)[0].size == 2


#: Modules the window's first frame does not need: their pages, the recorder and the guards load later.
# desktop.recorder is not among them: its tick is the window's recording too (issue 35; ~3 ms, no history layer).
NOT_BEFORE_FIRST_FRAME = ("advisor.guard", "desktop.ui.pages.processes", "desktop.stress.runner",
                          "desktop.reporting", "desktop.report_week", "desktop.report_output",
                          "desktop.history.store", "desktop.ui.pages.advisor_page")


def test_the_first_frame_imports_none_of_what_it_does_not_show() -> None:
    """A fresh interpreter: the window on a simulated GPU, one snapshot on the Dashboard (tests/bench's cold start)."""
    code = ("import sys\n"
            "from PySide6.QtWidgets import QApplication\n"
            "from desktop.config import Settings\n"
            "from desktop.telemetry.sampler import Sampler\n"
            "from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list\n"
            "from desktop.ui.app import RigscopeApp\n"
            "from desktop.sessions.recording import RecordingSession\n"
            "qt = QApplication([])\n"
            "app = RigscopeApp(qt, Sampler(SimulatedBackend(parse_profile_list(None)), None), Settings(),\n"
            "                  RecordingSession('off', 'test'), tray_available=False)\n"
            "app.window.show()\n"
            "app.on_snapshot(app.sampler.tick())\n"
            "qt.processEvents()\n"
            f"print(' '.join(m for m in {NOT_BEFORE_FIRST_FRAME!r} if m in sys.modules))\n"
            "app.shutdown()\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                          env=env)
    assert done.stdout.strip() == "", f"the first frame imported {done.stdout.strip()}"
