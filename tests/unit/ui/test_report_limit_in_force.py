"""The weekly report's power chart draws the limit in force, not the GPU's last one (issue 32).

Before, the chart drew one dashed line at ``GpuMeta.power_limit_w``: a week capped at 150 W until a firmware
switch to 175 W showed the whole week against 175 W.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from desktop.reporting import hourly
from tests.unit.advisor.crafted import gpu

HOUR = 3600.0


def _switched() -> object:
    """Crafted rows (8 hours) with their limit in force: 150 W for 4 hours, then 175 W; the GPU's last read 175 W."""
    base = gpu()
    limit = np.where(base.time_s < base.time_s[0] + 4 * HOUR, 150.0, 175.0)
    return dataclasses.replace(base, meta=dataclasses.replace(base.meta, power_limit_w=175.0), power_limit_w=limit)


def test_each_hour_carries_the_limit_then_in_force() -> None:
    series = _switched()
    out = hourly(series, float(series.time_s[0]), float(series.time_s[0]) + 8 * HOUR)  # type: ignore[attr-defined]
    limits = out["power_limit_w"]
    before, after = limits[:4], limits[4:]
    assert before.tolist() == [150.0] * 4 and after.tolist() == [175.0] * 4


def test_the_power_chart_draws_a_moving_limit_as_its_own_line(qapp: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from desktop.ui.report import report_charts as rc
    from desktop.ui.report import reports

    drawn: dict[str, object] = {}

    def spy(time_s: object, series: list[tuple[str, object]], **kwargs: object) -> bytes:
        title = str(kwargs.get("title", ""))
        drawn[title.rsplit(" ", 1)[-1]] = ([label for label, _ in series], kwargs.get("limit"))
        return b""

    monkeypatch.setattr(rc, "time_chart_png", spy)
    monkeypatch.setattr(rc, "heatmap_png", lambda *a, **k: b"")
    monkeypatch.setattr(rc, "bar_chart_png", lambda *a, **k: b"")
    series = _switched()
    start = float(series.time_s[0])  # type: ignore[attr-defined]
    uuid = series.meta.uuid  # type: ignore[attr-defined]
    week = SimpleNamespace(uuid=uuid, index=0, heatmap_pct=None, daily_busy_hours=[0.0] * 7)
    data = SimpleNamespace(advice=SimpleNamespace(frame=SimpleNamespace(gpus=(series,))),
                           summary=SimpleNamespace(gpus=[week]), labels={}, chart_captions={},
                           series={uuid: hourly(series, start, start + 8 * HOUR)})  # type: ignore[arg-type]
    reports.render_charts(data)  # type: ignore[arg-type]
    assert drawn["power"] == (["power", "power limit in force"], None)
    assert drawn["temperature"] == (["temperature"], (89.0, "slowdown"))  # one slowdown all week: a dashed line
