"""The dashboard says whether a GPU's effective load is measured (GPM) or estimated, and switches when that changes."""

from __future__ import annotations

import dataclasses

import pytest
from pytestqt.qtbot import QtBot

from desktop.telemetry.model import DeviceState, GpmActivity, GpuInfo, GpuReading, GpuSample
from desktop.ui.pages.dashboard_panel import EFFECTIVE_LOAD_LABEL, MEASURED_LOAD_LABEL, GpuPanel
from desktop.ui.theme import DARK, LIGHT, Theme
from desktop.ui.widgets.cards import reading_texts

H100 = GpuInfo(index=0, uuid="GPU-h100", name="NVIDIA H100 80GB HBM3", power_limit_enforced_w=700.0,
               sm_clock_max_mhz=1980.0, vram_total_mib=81559.0, gpm_supported=True)
T0 = 1_795_000_000.0


def _reading(info: GpuInfo, load: float | None, activity: GpmActivity | None = None) -> GpuReading:
    return GpuReading(info, DeviceState.OK, GpuSample(utilization_gpu_pct=100.0, utilization_mem_pct=48.0,
                                                      power_w=520.0, sm_clock_mhz=1755.0, effective_load_pct=load),
                      activity=activity)


def test_card_says_act_for_measured_and_eff_for_estimated() -> None:
    measured = reading_texts(H100, _reading(H100, 62.4, GpmActivity(62.4, 41.0, 55.0)))
    assert measured["utilization"] == "100 % · act. 62 %"
    assert measured["utilization_tip"].startswith("Tensor cores 41 %, DRAM bandwidth 55 %. Memory controller 48 %.")
    assert "measured by the GPU itself" in measured["utilization_tip"]
    estimated_info = dataclasses.replace(H100, gpm_supported=False)
    estimated = reading_texts(estimated_info, _reading(estimated_info, 62.4))
    assert estimated["utilization"] == "100 % · eff. 62 %"
    assert "estimated from power and SM clock" in estimated["utilization_tip"]


@pytest.mark.parametrize("theme", [DARK, LIGHT])
def test_the_plot_line_is_relabelled_when_the_gpu_measures(qtbot: QtBot, theme: Theme) -> None:
    estimated_info = dataclasses.replace(H100, gpm_supported=False)
    panel = GpuPanel(estimated_info, 600, theme)
    qtbot.addWidget(panel)
    util = panel.plots.plot("util")
    assert util.title == "Utilization"
    assert ("Effective load (estimate)", "dash") in [(label, st) for label, _c, st in util.legend()]
    assert util._series["effective_load_pct"].label == EFFECTIVE_LOAD_LABEL
    for i in range(60):  # an estimate first (a GPU whose GPM only answered after a while) ...
        panel.add_reading(T0 + i, _reading(estimated_info, 80.0))
    for i in range(60, 120):  # ... then measured
        panel.add_reading(T0 + i, _reading(H100, 62.0, GpmActivity(62.0, 41.0, 55.0)))
    panel.resize(900, 700)
    panel.paint(T0, T0 + 120)
    assert ("SM activity (measured)", "dash") in [(label, st) for label, _c, st in util.legend()]
    assert util._series["effective_load_pct"].label == MEASURED_LOAD_LABEL == "SM activity (measured)"
    assert panel.card.values["utilization"].text() == "100 % · act. 62 %"
    panel.grab().save(f"/tmp/gpm_panel_{'dark' if theme is DARK else 'light'}.png")
    # GPM stopped answering: back to the estimate, and the label says so.
    panel.add_reading(T0 + 120, _reading(estimated_info, 78.0))
    assert util._series["effective_load_pct"].label == EFFECTIVE_LOAD_LABEL
    assert panel.card.values["utilization"].text() == "100 % · eff. 78 %"
