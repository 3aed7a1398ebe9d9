"""A GPU card's changing values repaint only their own labels, not the card and every parent under them
(issue 27 item 2: with several GPUs that was the bounding box of all changed labels, up to the window)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list
from desktop.ui.pages.dashboard import DashboardPage
from desktop.ui.theme import DARK, LIGHT

T0 = 1_795_000_000.0


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.painted: list[QObject] = []

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.painted.append(obj)
        return False


def test_new_values_repaint_no_parent_of_the_labels(qtbot: QtBot) -> None:
    clock = [T0]
    backend = SimulatedBackend(parse_profile_list("rtx4090,rtx4090"))
    sampler = Sampler(backend, None, clock=lambda: clock[0], monotonic=lambda: clock[0])
    page = DashboardPage(LIGHT, now=lambda: clock[0])
    page.repaint_plots = lambda: None  # type: ignore[method-assign]  # the cards only
    qtbot.addWidget(page)
    page.resize(1200, 800)
    page.show()
    qtbot.waitExposed(page)
    page.add_snapshot(sampler.tick())
    QApplication.processEvents()
    changed = []
    paints = _Paints()
    app = QApplication.instance()
    assert app is not None
    app.installEventFilter(paints)
    try:
        for load in (0.2, 0.9):
            for index in range(2):
                backend.manual.set(index, load, 6000.0)
            clock[0] += 1.0
            before = {i: {k: v.text() for k, v in p.card.values.items()} for i, p in page.panels.items()}
            page.add_snapshot(sampler.tick())
            changed += [k for i, p in page.panels.items() for k, v in p.card.values.items() if v.text() != before[i][k]]
            QApplication.processEvents()
    finally:
        app.removeEventFilter(paints)
    assert changed, "the values did not change: the test shows nothing"
    cards = [p.card for p in page.panels.values()]
    parents = {id(w) for card in cards for w in (card, card.parentWidget(), page)}
    assert not [w for w in paints.painted if id(w) in parents]
    assert any(w in cards[0].values.values() for w in paints.painted if isinstance(w, QWidget))


def test_opaque_labels_follow_the_theme(qtbot: QtBot) -> None:
    page = DashboardPage(LIGHT)
    qtbot.addWidget(page)
    page.add_snapshot(Sampler(SimulatedBackend(parse_profile_list("rtx4090")), None, clock=lambda: T0).tick())
    card = page.panels[0].card
    page.apply_theme(DARK)
    for label in (*card.values.values(), card.throttle_label, *page.host_strip.labels.values()):
        assert label.autoFillBackground()
        assert label.palette().color(QPalette.ColorRole.Window).name() == DARK.base
