"""The Processes page's empty state says why where the driver lists no process at all (WSL2)."""

from __future__ import annotations

from desktop.telemetry.model import Snapshot, SourceInfo
from desktop.telemetry.nvml.backend import WSL_PROCESSES_NOTE
from desktop.ui.pages.processes import EMPTY_TEXT, ProcessesPage
from desktop.ui.theme import LIGHT


def _snapshot(note: str | None) -> Snapshot:
    return Snapshot(time_s=1000.0, monotonic_s=1.0, source=SourceInfo("nvml", "NVML 566.36", processes_note=note),
                    gpus=(), processes=(), processes_fresh=True)


def test_the_empty_page_explains_wsl2_and_otherwise_says_none_right_now(qtbot):
    page = ProcessesPage(LIGHT)
    qtbot.addWidget(page)
    page.add_snapshot(_snapshot(WSL_PROCESSES_NOTE))
    assert page.stack.currentWidget() is page.empty
    assert "WSL2" in page.empty.text() and "Windows" in page.empty.text()
    page.add_snapshot(_snapshot(None))
    assert page.empty.text() == EMPTY_TEXT
