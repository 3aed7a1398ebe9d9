"""The GPU card and the host strip read right in both themes, and after a switch: the values sit on the
card's own background in the theme's text colour (opaque labels, so a new value repaints only itself)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample, HostSample
from desktop.ui.theme import DARK, LIGHT, Theme, apply_theme, contrast_ratio
from desktop.ui.widgets.cards import GpuCard, HostStrip

INFO = GpuInfo(index=0, uuid="GPU-1", name="NVIDIA GeForce RTX 4090 Laptop GPU", vram_total_mib=16376.0)
READING = GpuReading(INFO, DeviceState.OK, GpuSample(temperature_c=71.0, utilization_gpu_pct=97.0,
                                                     vram_used_mib=12000.0, power_w=148.0, sm_clock_mhz=2010.0))
HOST = HostSample(cpu_pct=23.0, ram_used_mib=20_000.0, ram_total_mib=32_000.0)


def _app() -> QApplication:
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    return qapp


def _colours(widget: QWidget, label: QLabel) -> Counter[str]:
    image: QImage = widget.grab().toImage()
    rect = label.geometry()
    return Counter(image.pixelColor(x, y).name() for x in range(rect.left(), rect.right())
                   for y in range(rect.top(), rect.bottom()))


def _check(widget: QWidget, labels: list[QLabel], theme: Theme) -> None:
    _app().processEvents()  # the layout places the new texts
    for label in labels:
        assert label.autoFillBackground(), "a value label that is not opaque repaints its card under it"
        colours = _colours(widget, label)
        background, _ = colours.most_common(1)[0]
        assert background == QColor(theme.base).name(), (label.text(), colours.most_common(3))
        ink = max(colours, key=lambda c: contrast_ratio(c, theme.base))
        assert contrast_ratio(ink, theme.base) >= 4.5, (label.text(), ink)  # the text is drawn, readable


@pytest.mark.parametrize("first, then", [(LIGHT, DARK), (DARK, LIGHT)], ids=["light-dark", "dark-light"])
def test_the_values_sit_on_the_card_in_the_themes_colours_after_a_switch(qtbot: QtBot, first: Theme,
                                                                          then: Theme) -> None:
    try:
        apply_theme(_app(), first)
        card, strip = GpuCard(INFO, first), HostStrip(first)
        for widget in (card, strip):
            qtbot.addWidget(widget)
            widget.resize(1200, 140)
            widget.show()
        card.update_reading(READING)
        strip.update_host(HOST)
        assert card.styleSheet() == "" and strip.styleSheet() == ""  # no style sheet over the subtree
        _check(card, list(card.values.values()), first)
        _check(strip, [strip.labels["cpu"], strip.labels["ram"]], first)
        apply_theme(_app(), then)  # as the window switches: the palette first, then each widget
        card.apply_theme(then)
        strip.apply_theme(then)
        _check(card, list(card.values.values()), then)
        _check(strip, [strip.labels["cpu"], strip.labels["ram"]], then)
        corner = card.grab().toImage().pixelColor(card.width() // 2, 2).name()
        assert corner == QColor(then.base).name()  # the card's own background, painted by hand
    finally:
        apply_theme(_app(), DARK)


class _LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def test_a_new_value_does_not_lay_out_the_window_again_and_a_longer_one_still_fits(qtbot: QtBot) -> None:
    outer = QWidget()
    qtbot.addWidget(outer)
    layout = QVBoxLayout(outer)
    card, strip = GpuCard(INFO, LIGHT), HostStrip(LIGHT)
    layout.addWidget(card)
    layout.addWidget(strip)
    outer.resize(1200, 260)
    outer.show()
    card.update_reading(READING)
    strip.update_host(HOST)
    qtbot.wait(20)  # the first values lay out, up to the window (events posted while events are processed)
    requests = _LayoutRequests()
    outer.installEventFilter(requests)
    for step in range(1, 6):  # every second, new digits
        card.update_reading(replace(READING, sample=replace(READING.sample, temperature_c=71.0 + step,
                                                            utilization_gpu_pct=90.0 + step)))
        strip.update_host(replace(HOST, cpu_pct=23.0 + step))
        _app().processEvents()
    assert requests.count == 0  # the values repainted; nothing up to the window was laid out again
    longer = "CPU 100 % at 5,400 MHz, 101 °C"
    strip.update_host(replace(HOST, cpu_pct=100.0, cpu_freq_mhz=5400.0, cpu_temp_c=101.0))
    _app().processEvents()
    label = strip.labels["cpu"]
    assert label.text() == longer
    assert label.width() >= label.fontMetrics().horizontalAdvance(longer)  # it grew to fit, once


@pytest.mark.parametrize("width", [900, 1400, 1900])
def test_the_value_tiles_start_at_the_cards_left_edge_at_any_width(qtbot: QtBot, width: int) -> None:
    card = GpuCard(INFO, LIGHT)
    qtbot.addWidget(card)
    card.resize(width, 140)
    card.show()
    card.update_reading(READING)
    qtbot.wait(20)
    first = card.values["utilization"]
    assert first.geometry().left() == card.driver_label.geometry().left()  # the grid is not centred
    assert card.values["clock"].geometry().right() > card.width() * 0.75  # the columns share the width
