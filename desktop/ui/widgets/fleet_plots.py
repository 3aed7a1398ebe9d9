"""The Fleet page's plots of one machine: the Dashboard's ``PlotColumn`` with a series per GPU and throttle lanes."""

from __future__ import annotations

import html
from collections.abc import Iterable

import numpy as np

from advisor.safetext import printable
from desktop.fleet.history import LANE_LABELS, LANE_TITLES, VIOLATION_LANES, MachineHistory
from desktop.fleet.model import FleetMachine
from desktop.ui.theme import Theme
from desktop.ui.widgets.plot_column import PlotColumn

#: The plots of a clicked machine: key, title, unit (the Dashboard's set).
PLOTS: tuple[tuple[str, str, str], ...] = (
    ("util", "GPU utilization", "%"), ("vram", "VRAM used", "MiB"), ("temp", "Temperature", "°C"),
    ("power", "Power", "W"), ("clock", "SM clock", "MHz"),
)


def legend_html(theme: Theme, machine: FleetMachine | None) -> str:
    """Which colour is which GPU, as rich text (names escaped)."""
    if machine is None:
        return ""
    series = theme.series
    return "&nbsp;&nbsp;".join(
        f"<span style='color:{series[i % len(series)]}'>━━</span> "
        f"{html.escape(printable(' '.join(('GPU', g.index or g.uuid, g.model or ''))).strip())}"
        for i, g in enumerate(machine.gpus))


def machine_plots(theme: Theme, machine: FleetMachine | None = None,
                  history: MachineHistory | None = None) -> PlotColumn:
    """A fresh column for one machine: a series per GPU in each plot, a lane row per throttle cause."""
    column = PlotColumn(theme)
    gpus = [g.uuid for g in machine.gpus] if machine is not None else []
    labels = {g.uuid: f"GPU {printable(g.index or g.uuid)}" for g in machine.gpus} if machine else {}
    lane_names = _lane_names(history)
    for key, title, unit in PLOTS:
        plot = column.add_plot(key, title, unit, y_range=(0, 100) if key == "util" else None)
        for i, gpu in enumerate(gpus):
            plot.add_series(gpu, labels[gpu], colour=theme.series[i % len(theme.series)])
            points = history.series.get(gpu, {}).get(key, []) if history else []
            plot.set_data(gpu, *_arrays(points))
    if machine is not None:
        for key, limit, text in (("power", max(_known(g.power_limit_w for g in machine.gpus), default=None),
                                  "power limit"),
                                 ("vram", max(_known(g.vram_total_mib for g in machine.gpus), default=None),
                                  "total"),
                                 ("temp", min(_known(g.slowdown_temperature_c for g in machine.gpus), default=None),
                                  "slowdown")):
            column.plot(key).set_limit(key, limit, text)
    lane = column.add_plot("lane", "Throttle causes (share of time)", "", height=70 + 18 * len(lane_names))
    for i, gpu in enumerate(gpus):
        for row, reason in enumerate(lane_names):
            key = f"{gpu}/{reason}"
            lane.add_series(key, f"{labels[gpu]} {reason}", colour=theme.series[i % len(theme.series)],
                            width=2, style="solid", downsample=False)
            times, shares = _arrays(history.lanes.get(gpu, {}).get(reason, []) if history else [])
            lane.set_data(key, times, row - 0.4 + 0.8 * shares)
    lane.set_categories([LANE_TITLES.get(name, name) for name in lane_names])
    return column


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _lane_names(history: MachineHistory | None) -> list[str]:
    """A DCGM-only machine's two violation counters; a Rigscope machine's throttle causes that held in the
    window (in the exporter's order), else the one row "none" (ten empty rows would leave no room for names)."""
    if history is not None and history.violation_lanes:
        return list(VIOLATION_LANES.values())
    held = {reason for lanes in (history.lanes.values() if history else ()) for reason, points in lanes.items()
            if any(share > 0 for _t, share in points)}
    return [label for label in LANE_LABELS if label in held] or ["none"]


def _arrays(points: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    if not points:
        return np.empty(0), np.empty(0)
    data = np.asarray(points, dtype=float)
    return data[:, 0], data[:, 1]
