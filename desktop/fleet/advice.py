"""Fleet advice from Prometheus history: who throttles and why, who sits idle, own vs rent for the team.

Five instant queries over the last 7 days, each across every machine (never one per machine):
busy seconds per GPU (utilization at or above ``DEFAULT_BUSY_UTIL_PCT``, the advisor's busy rule, counted
per minute), recorded seconds, energy, and the throttle seconds per cause (Rigscope's clock-event counters,
or dcgm-exporter's power and thermal violation counters). Own vs rent per GPU model goes through
``advisor.costs.compare``, the Costs page's computation, with the busy hours and energy measured here; the
fleet has no purchase prices, so owning counts electricity only and says so. No Qt, no I/O beyond the client.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from advisor.costs import CloudCost, CloudOffer, CostComparison, CostInputs, GpuSpec, Usage, compare
from advisor.thresholds import DEFAULT_BUSY_UTIL_PCT
from desktop.config import Settings
from desktop.fleet.client import PrometheusClient, Sample
from desktop.fleet.history import LANE_LABELS, LANE_TITLES, VIOLATION_LANES
from desktop.fleet.model import Fleet
from desktop.fleet.reader import gpu_key, machine_name
from desktop.telemetry import metric_names as names
from desktop.telemetry.metric_names import dcgm_name

WINDOW = "7d"
WINDOW_S = 7 * 86400.0
#: The resolution of the busy, recorded and energy counts (a subquery step).
STEP_S = 60.0
#: A machine busy less than this share of its recorded time "sits idle".
IDLE_SHARE = 0.10
#: Throttled less than this share of the busy time is not worth a line.
THROTTLE_SHARE = 0.02

_UTIL, _POWER = dcgm_name("utilization_gpu_pct"), dcgm_name("power_w")
_SUB = f"[{WINDOW}:{STEP_S:g}s]"
#: Query key -> PromQL: each answers for every GPU of every machine at once.
QUERIES: dict[str, str] = {
    "busy_s": f"sum_over_time(({_UTIL} >= bool {DEFAULT_BUSY_UTIL_PCT:g}){_SUB}) * {STEP_S:g}",
    "recorded_s": f"count_over_time({_UTIL}{_SUB}) * {STEP_S:g}",
    "energy_kwh": f"sum_over_time({_POWER}{_SUB}) * {STEP_S:g} / 3.6e6",
    "throttle_s": f"increase({names.CLOCK_EVENT_SECONDS}_total[{WINDOW}])",
    "violation_s": " or ".join(f"label_replace(increase({metric}[{WINDOW}]) / {names.NS_PER_S:g}, "
                               f"\"{names.REASON_LABEL}\", \"{lane}\", \"\", \"\")"
                               for metric, lane in VIOLATION_LANES.items()),
}


@dataclass
class GpuUse:
    machine: str
    gpu: str
    model: str
    busy_s: float = 0.0
    recorded_s: float = 0.0
    energy_kwh: float = 0.0
    #: Throttle cause (exporter label, or "power"/"thermal" from DCGM) -> seconds in the window.
    throttle_s: dict[str, float] = field(default_factory=dict)
    #: The GPU's index on its machine, where a series said it.
    index: str | None = None

    @property
    def label(self) -> str:
        return f"GPU {self.index}" if self.index is not None else self.gpu


@dataclass(frozen=True)
class FleetAdvice:
    """What the page and ``rigscope fleet`` say; ``lines`` is the text, the rest the figures behind it."""

    gpus: tuple[GpuUse, ...]
    #: Per machine and per GPU model: (busy GPU-hours, recorded GPU-hours) over the window.
    by_machine: dict[str, tuple[float, float]]
    by_model: dict[str, tuple[float, float]]
    #: Own vs rent per GPU model (the Costs page's computation).
    costs: dict[str, CostComparison]
    lines: tuple[str, ...]
    requests: int

    def to_dict(self) -> dict[str, Any]:
        """``rigscope fleet --advice --json``'s "advice": the lines and the figures behind them (units named)."""
        return {
            "window_s": WINDOW_S, "requests": self.requests, "lines": list(self.lines),
            "busy_gpu_hours_by_machine": {k: {"busy_h": b, "recorded_h": r} for k, (b, r) in self.by_machine.items()},
            "busy_gpu_hours_by_model": {k: {"busy_h": b, "recorded_h": r} for k, (b, r) in self.by_model.items()},
            "gpus": [{"machine": u.machine, "uuid": u.gpu, "index": u.index, "model": u.model, "busy_s": u.busy_s,
                      "recorded_s": u.recorded_s, "energy_kwh": u.energy_kwh, "throttle_s": dict(u.throttle_s)}
                     for u in self.gpus],
            "own_vs_rent": {model: {"owned_month": c.owned_month, "currency": c.currency,
                                    "busy_hours_month": c.busy_hours_month,
                                    "cloud": [{"provider": o.offer.provider, "gpu": o.offer.gpu_model,
                                               "on_demand_usd_month": o.on_demand_month} for o in c.options]}
                            for model, c in self.costs.items()},
        }


def read_usage(client: PrometheusClient, fleet: Fleet) -> tuple[list[GpuUse], int]:
    """Every GPU's last 7 days (5 requests); models and machines as the fleet reading names them."""
    before = client.requests
    answers = {key: client.query(promql) for key, promql in QUERIES.items()}
    return usage_from(answers, fleet), client.requests - before


def usage_from(answers: dict[str, list[Sample]], fleet: Fleet) -> list[GpuUse]:
    models = {(m.name, g.uuid): g.model or "unknown GPU" for m in fleet.machines for g in m.gpus}
    gpus: dict[tuple[str, str], GpuUse] = {}
    for key, rows in answers.items():
        for sample in rows:
            where = (machine_name(sample.labels), gpu_key(sample.labels))
            use = gpus.get(where)
            if use is None:
                model = models.get(where) or sample.labels.get(names.MODEL_LABEL) or "unknown GPU"
                use = gpus[where] = GpuUse(where[0], where[1], model, index=sample.labels.get(names.GPU_INDEX_LABEL))
            if key in ("throttle_s", "violation_s"):
                reason = sample.labels.get(names.REASON_LABEL, "")
                if reason in LANE_LABELS or reason in VIOLATION_LANES.values():
                    use.throttle_s[reason] = max(use.throttle_s.get(reason, 0.0), sample.value)
            else:  # the same GPU from two targets (Rigscope and dcgm-exporter on one host) is counted once
                setattr(use, key, max(getattr(use, key), sample.value))
    return sorted(gpus.values(), key=lambda u: (u.machine, u.gpu))


def fleet_advice(uses: list[GpuUse], *, offers: list[CloudOffer], specs: list[GpuSpec], inputs: CostInputs,
                 vram_mib: dict[str, float] | None = None, requests: int = 0) -> FleetAdvice:
    """The advice over measured use: throttling (most throttled first), idle machines, own vs rent per model."""
    by_machine: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    by_model: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for use in uses:
        for table, key in ((by_machine, use.machine), (by_model, use.model)):
            table[key][0] += use.busy_s / 3600.0
            table[key][1] += use.recorded_s / 3600.0
    lines: list[str] = []
    throttled = sorted(((sum(u.throttle_s.values()), u) for u in uses if u.busy_s > 0), key=lambda t: -t[0])
    for seconds, use in throttled:
        if seconds < THROTTLE_SHARE * use.busy_s:
            continue
        causes = ", ".join(f"{LANE_TITLES.get(r, r)} {s / 3600.0:.1f} h" for r, s in
                           sorted(use.throttle_s.items(), key=lambda rs: -rs[1]) if s > 0)
        lines.append(f"{use.machine} {use.label}: throttled {seconds / use.busy_s:.0%} of its "
                     f"{use.busy_s / 3600.0:.0f} busy h in 7 days ({causes})")
    for machine, (busy_h, recorded_h) in sorted(by_machine.items()):
        if recorded_h > 0 and busy_h < IDLE_SHARE * recorded_h:
            lines.append(f"{machine} sits idle: busy {busy_h:.0f} of {recorded_h:.0f} recorded GPU-hours "
                         f"({busy_h / recorded_h:.0%}) in 7 days")
    # The fleet's machines have no purchase price here: electricity only, and the line says so.
    electricity = CostInputs(0.0, inputs.amortisation_months, inputs.electricity_price_per_kwh, inputs.currency)
    costs: dict[str, CostComparison] = {}
    for model in sorted(by_model):
        group = [u for u in uses if u.model == model]
        usage = Usage(window_s=WINDOW_S, busy_s=sum(u.busy_s for u in group),
                      energy_kwh=sum(u.energy_kwh for u in group),
                      recorded_s=max((u.recorded_s for u in group), default=0.0) or None,
                      window_label="the last 7 days")
        comparison = compare(model, (vram_mib or {}).get(model), usage, electricity, offers=offers, specs=specs)
        costs[model] = comparison
        busy_h, recorded_h = by_model[model]
        cheapest = _cheapest_holding(comparison, (vram_mib or {}).get(model))
        rent = (f"renting it: {cheapest.on_demand_month:.0f} USD/month on {cheapest.offer.provider} "
                f"{cheapest.offer.gpu_model}" if cheapest is not None else "no cloud price for it")
        lines.append(f"{model} x{len(group)}: busy {busy_h:.0f} of {recorded_h:.0f} GPU-hours in 7 days; "
                     f"electricity {comparison.owned_month:.0f} {inputs.currency}/month; {rent}")
    if costs:
        lines.append("Owning counts electricity only here: the fleet's machines have no purchase price.")
    return FleetAdvice(tuple(uses), {k: (v[0], v[1]) for k, v in by_machine.items()},
                       {k: (v[0], v[1]) for k, v in by_model.items()}, costs, tuple(lines), requests)


def _cheapest_holding(comparison: CostComparison, vram_mib: float | None) -> CloudCost | None:
    """The cheapest cloud option whose GPU holds as much memory as the model's (the work must fit), else the
    cheapest of all (options come sorted by their monthly cost)."""
    holding = [o for o in comparison.options if vram_mib is None or o.offer.vram_gb * 1024.0 >= 0.95 * vram_mib]
    chosen = holding or list(comparison.options)
    return chosen[0] if chosen else None


def advise(client: PrometheusClient, fleet: Fleet, settings: Settings) -> FleetAdvice:
    """The Fleet page's advice: the last 7 days read and weighed with the Costs page's price tables and inputs."""
    from desktop.advice import cost_inputs_from, load_cloud_offers, load_gpu_specs  # the tables, read when asked

    uses, requests = read_usage(client, fleet)
    vram = {g.model: g.vram_total_mib for m in fleet.machines for g in m.gpus if g.model and g.vram_total_mib}
    return fleet_advice(uses, offers=load_cloud_offers(), specs=load_gpu_specs(),
                        inputs=cost_inputs_from(settings.costs), vram_mib=vram, requests=requests)
