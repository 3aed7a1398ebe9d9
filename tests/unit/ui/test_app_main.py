"""`rigscope gui` wiring: opens the window on the simulated GPU, records, and quits cleanly."""

from __future__ import annotations

import argparse

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from desktop.cli import gui
from desktop.errors import UserError
from desktop.ui import app as app_module


def test_gui_main_opens_records_and_quits(qapp, tmp_path, monkeypatch):
    seen = {}
    real_start = app_module.RigscopeApp.start

    def start(self, show=True):
        seen["app"] = self
        real_start(self, show)
        # Quit once the first snapshots arrived (the real event loop runs until then).
        def check() -> None:
            if self.last_snapshot is not None:
                self.quit()
            else:
                QTimer.singleShot(50, check)
        QTimer.singleShot(50, check)

    monkeypatch.setattr(app_module.RigscopeApp, "start", start)
    quit_on_close = qapp.quitOnLastWindowClosed()
    try:
        code = gui.main(argparse.Namespace(simulate="", db=str(tmp_path / "h.sqlite")))
    finally:
        qapp.setQuitOnLastWindowClosed(quit_on_close)
    assert code == 0
    app = seen["app"]
    assert app.recording.writer is None  # closed on the way out
    assert "simulated" in app.window.source_label.text()
    assert app.window.recording_label.text().startswith("Recording")
    assert not app.sampling.isRunning()
    assert (tmp_path / "h.sqlite").exists()
    assert QApplication.instance() is qapp


def test_an_unknown_simulated_profile_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="unknown simulated GPU profile"):
        gui.main(argparse.Namespace(simulate="gtx-nope", db=str(tmp_path / "h.sqlite")))
