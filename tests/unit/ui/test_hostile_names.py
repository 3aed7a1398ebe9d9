"""A process or GPU named like markup is shown as the text it is, in every label, tooltip and message box (issue 12)."""

from __future__ import annotations

import dataclasses

from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from desktop.telemetry.model import GpuProcess, Snapshot
from desktop.ui.pages.processes import ProcessesPage
from desktop.ui.text import plain_tooltip

#: Another user can give a process this name with prctl(PR_SET_NAME) (15 bytes there; argv is longer).
HOSTILE = '<img src="/etc/passwd"><b>x</b>'
MARK = "/etc/passwd"


def shown(text: str, text_format: Qt.TextFormat = Qt.TextFormat.AutoText) -> str:
    """The characters Qt puts on screen for ``text`` (rich text rendered, the way QLabel/QToolTip decide)."""
    rich = text_format == Qt.TextFormat.RichText or (
        text_format == Qt.TextFormat.AutoText and QtGui.Qt.mightBeRichText(text))
    if not rich:
        return text
    doc = QTextDocument()
    doc.setHtml(text)
    return doc.toPlainText()


def _hostile_snapshot(snap: Snapshot) -> Snapshot:
    reading = snap.gpus[0]
    info = dataclasses.replace(reading.info, name=HOSTILE)
    proc = GpuProcess(pid=4242, gpu_index=0, name=HOSTILE, user=HOSTILE, vram_mib=2048.0, kind="compute",
                      cpu_pct=50.0, started_s=snap.time_s - 60.0, own=True)
    return dataclasses.replace(snap, gpus=(dataclasses.replace(reading, info=info), *snap.gpus[1:]),
                               processes=(proc,), processes_fresh=True)


def test_plain_tooltip_survives_qts_rich_text_guess() -> None:
    for text in (HOSTILE, "a < b", "line one\nline two", "plain"):
        assert shown(plain_tooltip(text)) == text
    assert plain_tooltip("") == ""


def test_every_label_tooltip_and_message_box_shows_a_hostile_name_as_text(make_app, monkeypatch) -> None:
    h = make_app("rtx4090-laptop,rtx4090", end_process=lambda pid, started_s: None)
    h.app.window.show()
    h.clock.now_s += 1.0
    # the very first snapshot carries the names: the cards take their name label from it
    h.app.on_snapshot(_hostile_snapshot(h.app.sampler.tick()))
    window = h.app.window
    for key in window.page_keys():  # build the lazy pages too
        window.page(key)

    page = h.app.processes
    assert isinstance(page, ProcessesPage)
    page.table.selectRow(0)
    assert page.selected() is not None and page.selected().name == HOSTILE
    box = page.confirm_box(page.selected())
    assert isinstance(box, QMessageBox)
    assert HOSTILE in shown(box.text(), box.textFormat())
    box.deleteLater()
    monkeypatch.setattr(QMessageBox, "exec", lambda self: QMessageBox.StandardButton.Yes)
    page.end_selected()  # -> "Asked <name> (pid 4242) to end."

    found = {"label": 0, "tooltip": 0, "cell tooltip": 0}
    for widget in [window, *window.findChildren(QWidget)]:
        if isinstance(widget, QLabel) and MARK in widget.text():
            found["label"] += 1
            assert HOSTILE in shown(widget.text(), widget.textFormat()), (widget.objectName(), widget.text())
        if MARK in widget.toolTip():
            found["tooltip"] += 1
            assert HOSTILE in shown(widget.toolTip()), widget.toolTip()
    model = page.model
    for row in range(model.rowCount()):
        for column in range(model.columnCount()):
            tip = model.data(model.index(row, column), Qt.ItemDataRole.ToolTipRole)
            if tip and MARK in tip:
                found["cell tooltip"] += 1
                assert HOSTILE in shown(tip), tip
    # the card's name label and the "Asked ... to end" message at least; every cell's tooltip
    assert found["label"] >= 2 and found["cell tooltip"] == model.columnCount(), found
