"""The dashboard shows effective load beside utilization: on the card and as a dashed line in the utilization plot."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop.telemetry.model import DeviceState, GpuInfo, GpuReading, GpuSample
from desktop.ui.pages.dashboard_panel import EFFECTIVE_LOAD_LABEL, GpuPanel
from desktop.ui.theme import DARK, LIGHT
from desktop.ui.widgets.cards import reading_texts

INFO = GpuInfo(index=0, uuid="GPU-0", name="NVIDIA GeForce RTX 4090 Laptop GPU", power_limit_enforced_w=150.0,
               sm_clock_max_mhz=2040.0, vram_total_mib=16376.0)
T0 = 1_795_000_000.0


def _reading(effective: float | None, util: float = 97.0) -> GpuReading:
    return GpuReading(INFO, DeviceState.OK, GpuSample(utilization_gpu_pct=util, utilization_mem_pct=87.0,
                                                      power_w=66.0, sm_clock_mhz=2040.0,
                                                      effective_load_pct=effective))


def test_card_shows_effective_load_beside_utilization() -> None:
    texts = reading_texts(INFO, _reading(34.1))
    assert texts["utilization"] == "97 % · eff. 34 %"
    assert texts["utilization_tip"].startswith("Memory controller 87 %. Utilization: share of time a kernel ran.")
    # Without an estimate (no power reading) the card reads as before.
    assert reading_texts(INFO, _reading(None))["utilization"] == "97 %  (mem 87 %)"


@pytest.mark.parametrize("theme", [DARK, LIGHT])
def test_utilization_plot_draws_effective_load_dashed(qtbot: QtBot, theme: object) -> None:
    panel = GpuPanel(INFO, 600, theme)  # type: ignore[arg-type]
    qtbot.addWidget(panel)
    for i in range(120):
        panel.add_reading(T0 + i, _reading(97.0 if i < 60 else 34.0))
    panel.paint(T0, T0 + 120)
    util = panel.plots.plot("util")
    assert "effective_load_pct" in util.series_keys()
    times, values = util.data("effective_load_pct")
    assert times.size == 120 and values[0] == 97.0 and values[-1] == 34.0
    series = util._series["effective_load_pct"]
    assert series.label == EFFECTIVE_LOAD_LABEL == "Effective load (estimate)"
    assert series.live.opts["pen"].style() == Qt.PenStyle.DashLine
    assert util._series["utilization_gpu_pct"].live.opts["pen"].style() == Qt.PenStyle.SolidLine
    assert panel.card.values["utilization"].text() == "97 % · eff. 34 %"
    # A GPU without the estimate leaves a gap (NaN), not a zero line.
    panel.add_reading(T0 + 120, _reading(None))
    panel.paint(T0, T0 + 121)
    assert np.isnan(util.data("effective_load_pct")[1][-1])
