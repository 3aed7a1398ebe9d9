"""The weekly report's figures in units that show them (issue 24): "pp" for a percentage's change, minutes
for a few minutes of busy time (not "h (x0.001)"), a partial week said and compared per day."""

from __future__ import annotations

import dataclasses
from zoneinfo import ZoneInfo

import numpy as np

from desktop import config
from desktop.report_output import to_csv, to_json
from desktop.reporting import build_report
from desktop.ui.report.report_charts import readable_scale
from desktop.ui.report.report_html import render_html
from tests.unit.advisor.crafted import busy_mask, frame, gpu

UTC = ZoneInfo("UTC")


def test_minutes_of_busy_time_are_drawn_in_minutes_and_big_energies_in_kwh() -> None:
    assert readable_scale([0.001, 0.05, 0.0], "h") == ([0.06, 3.0, 0.0], "min")
    assert readable_scale([2.0, 0.5], "h") == ([2.0, 0.5], "h")
    assert readable_scale([4030.0, 2850.0], "Wh") == ([4.03, 2.85], "kWh")


def test_the_bar_chart_axis_never_rescales_its_unit(qapp) -> None:
    import pyqtgraph as pg

    from desktop.ui.report import report_charts as rc

    seen: list[bool] = []
    original = rc._style

    def spy(plot: pg.PlotItem, *args: object) -> None:
        original(plot, *args)
        seen.append(plot.getAxis("left").autoSIPrefix)

    rc._style = spy
    try:
        rc.bar_chart_png(["Mon", "Tue"], [0.001, 0.002], title="busy", y_label="h")
    finally:
        rc._style = original
    assert seen == [False]


def test_a_change_of_utilization_is_in_points_and_a_partial_week_is_said() -> None:
    now = frame()
    lower = gpu(utilization_gpu_pct=np.where(busy_mask(), 80.0, 0.0))
    short = dataclasses.replace(frame(gpus=(lower,)))
    keep = slice(0, 120)
    g = short.gpus[0]
    cut = dataclasses.replace(g, time_s=g.time_s[keep], duration_s=g.duration_s[keep], **{
        name: getattr(g, name)[keep] for name in ("utilization_gpu_pct", "utilization_mem_pct", "vram_used_mib",
                                                  "temperature_c", "power_w", "energy_mj", "sm_clock_mhz",
                                                  "mem_clock_mhz", "fan_pct", "pcie_gen", "pcie_width",
                                                  "clock_event_reasons")})
    previous = dataclasses.replace(short, gpus=(cut,))
    data = build_report(now, previous, config.Settings(), UTC, "2025-W48", now_s=now.end_s, offers=[], specs=[])
    html = render_html(data, lambda key: key)
    assert "+15.0 pp" in html and "+15.0 %" not in html
    assert "compared per recorded day" in html
    assert "Busy hours per recorded day" in html and "h/day" in html
    assert "Mean utilization while busy,15.0,pp" in to_csv(data)
    assert '"delta_unit": "pp"' in to_json(data)
