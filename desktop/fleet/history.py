"""One machine's time plots from Prometheus: ``query_range`` per metric over 1 h, 24 h or 7 d (no Qt).

The Fleet page shows these when a machine is clicked: the Dashboard's plots (utilization, VRAM, temperature,
power, SM clock) per GPU, and its throttle lanes: a Rigscope machine's share of each interval a throttle
reason held (``rate`` of ``rigscope_clock_event_seconds_total``), a DCGM-only machine's power and thermal
violation counters (ns counted per second, as a share). One request per metric, not per GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from advisor.clock_events import THROTTLE_REASONS
from desktop.fleet.client import PrometheusClient
from desktop.fleet.reader import gpu_key, machine_name
from desktop.telemetry import metric_names as names
from desktop.telemetry.metric_names import dcgm_name

#: The plot windows the page offers: label -> seconds.
WINDOWS_S: dict[str, float] = {"1 h": 3600.0, "24 h": 86400.0, "7 d": 7 * 86400.0}
#: Points per series at most (the step grows with the window), and the least step (a scrape interval).
MAX_POINTS = 400
MIN_STEP_S = 15.0

#: Plot key -> GpuSample field whose dcgm-exporter name is plotted (the Dashboard's plot set).
PLOTTED: dict[str, str] = {
    "util": "utilization_gpu_pct", "vram": "vram_used_mib", "temp": "temperature_c", "power": "power_w",
    "clock": "sm_clock_mhz",
}
#: The throttle reasons a lane shows for a Rigscope machine (their exporter label values).
LANE_LABELS: tuple[str, ...] = tuple(label for reason, label in names.REASONS if reason & THROTTLE_REASONS)
#: What a lane row is called on the plot (the Dashboard's names for the causes: "Power cap").
LANE_TITLES: dict[str, str] = {label: reason.label for reason, label in names.REASONS if label in LANE_LABELS}
#: A DCGM-only machine's lanes: its violation counters (name -> the lane's label).
VIOLATION_LANES: dict[str, str] = {"DCGM_FI_DEV_POWER_VIOLATION": "power", "DCGM_FI_DEV_THERMAL_VIOLATION": "thermal"}
LANE_TITLES.update({"power": "Power (DCGM)", "thermal": "Thermal (DCGM)"})

Points = list[tuple[float, float]]


@dataclass
class MachineHistory:
    """Per GPU (its key, as the reader has it) and plot key, (time_s, value) points; lanes by label as a share
    of the time (0..1)."""

    machine: str
    window_s: float
    start_s: float
    end_s: float
    step_s: float
    series: dict[str, dict[str, Points]] = field(default_factory=dict)
    lanes: dict[str, dict[str, Points]] = field(default_factory=dict)
    #: Whether the lanes are the violation counters (DCGM-only) rather than Rigscope's reasons.
    violation_lanes: bool = False
    requests: int = 0


def step_for(window_s: float) -> float:
    """The range query's step: at most ``MAX_POINTS`` points per series, never below one scrape."""
    return max(MIN_STEP_S, window_s / MAX_POINTS)


def machine_selector(metric: str, machine: str, wrap: str = "{}") -> str:
    """``metric`` for one machine, whichever label names it (``Hostname``, ``hostname``, else ``instance``);
    ``wrap`` puts each selector inside a function (``"rate({}[1m])"``: a range cannot follow an ``or``).

    The reader's grouping decides in the end (``machine_name`` over each series' labels): a series picked by
    ``instance`` whose ``Hostname`` names another machine is dropped by the caller."""
    # A PromQL string literal: quote, backslash and control characters escaped as JSON does (Go reads them alike).
    quoted = json.dumps(machine, ensure_ascii=False)
    labels = (*names.HOST_LABELS, names.INSTANCE_LABEL)
    return " or ".join(wrap.format(f"{metric}{{{label}={quoted}}}") for label in labels)


def read_history(client: PrometheusClient, machine: str, window_s: float, end_s: float, *,
                 dcgm_only: bool) -> MachineHistory:
    """The machine's plots over ``window_s`` ending at ``end_s`` (Unix time)."""
    step = step_for(window_s)
    start = end_s - window_s
    before = client.requests
    out = MachineHistory(machine, window_s, start, end_s, step, violation_lanes=dcgm_only)
    for key, sample_field in PLOTTED.items():
        for labels, points in client.query_range(machine_selector(dcgm_name(sample_field), machine), start, end_s,
                                                 step):
            if machine_name(labels) == machine:
                out.series.setdefault(gpu_key(labels), {})[key] = points
    window = f"[{max(step, 2 * MIN_STEP_S):g}s]"
    if dcgm_only:
        for metric, lane in VIOLATION_LANES.items():
            promql = f"({machine_selector(metric, machine, 'rate({}' + window + ')')}) / {names.NS_PER_S:g}"
            for labels, points in client.query_range(promql, start, end_s, step):
                if machine_name(labels) == machine:
                    out.lanes.setdefault(gpu_key(labels), {})[lane] = _shares(points)
    else:
        promql = machine_selector(names.CLOCK_EVENT_SECONDS + "_total", machine, "rate({}" + window + ")")
        for labels, points in client.query_range(promql, start, end_s, step):
            reason = labels.get(names.REASON_LABEL, "")
            if machine_name(labels) == machine and reason in LANE_LABELS:
                out.lanes.setdefault(gpu_key(labels), {})[reason] = _shares(points)
    out.requests = client.requests - before
    return out


def _shares(points: Points) -> Points:
    """Seconds per second as a share of the time, 0..1 (a counter reset's spike capped)."""
    return [(t, min(1.0, max(0.0, v))) for t, v in points]
