"""Read every machine and GPU now from a Prometheus server: one query per metric across all machines.

The queries are by name (``desktop.telemetry.metric_names``, the names the exporter writes), so a
Rigscope exporter and a plain dcgm-exporter are read by the same code. Each answer is grouped by
machine (``Hostname``, else ``hostname``, else the scrape target's ``instance``) and GPU (``UUID``,
else its index); a machine with any ``rigscope_*`` series is a Rigscope machine, the others are
DCGM-only and have fewer columns (``FleetMachine.missing``). The number of requests does not grow
with the number of machines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.clock_events import THROTTLE_REASONS
from desktop.fleet.client import PrometheusClient, Sample
from desktop.fleet.model import Fleet, FleetGpu, FleetMachine, Source, StressVerdict, attention_rank
from desktop.telemetry import metric_names as names
from desktop.telemetry.metric_names import dcgm_name

#: How far back a machine that stopped answering is still listed (as down, with when it was last seen).
LOOKBACK = "1h"
#: The resolution of "last seen" for a machine that stopped answering (a live one's is its last scrape).
LOOKBACK_STEP = "15s"

_TEMP = dcgm_name("temperature_c")

#: GPU field -> the PromQL that reads it for every GPU at once.
GPU_QUERIES: dict[str, str] = {
    "utilization_pct": dcgm_name("utilization_gpu_pct"),
    "vram_used_mib": dcgm_name("vram_used_mib"),
    "vram_free_mib": dcgm_name("vram_free_mib"),
    "temperature_c": _TEMP,
    "power_w": dcgm_name("power_w"),
    "sm_clock_mhz": dcgm_name("sm_clock_mhz"),
    # The last scrape of a live GPU; for one whose target stopped answering (its series went stale), the
    # last one seen within LOOKBACK.
    "last_seen_s": f"timestamp({_TEMP}) or max_over_time(timestamp({_TEMP})[{LOOKBACK}:{LOOKBACK_STEP}])",
    "power_limit_w": names.POWER_LIMIT_W,
    "sm_clock_max_mhz": names.SM_CLOCK_MAX_MHZ,
    "slowdown_temperature_c": names.SLOWDOWN_TEMPERATURE_C,
    "vram_total_mib": names.FB_TOTAL_MIB,
    # The reasons active now, and per GPU that reports reasons at all one series without ``reason`` (value
    # 0): a twelfth of the series of all reasons, and "none active" is still told from "not reported".
    "clock_event_active": f"{names.CLOCK_EVENT_ACTIVE} == 1 or count without ({names.REASON_LABEL}) "
                          f"({names.CLOCK_EVENT_ACTIVE}) * 0",
    # A dcgm-exporter's mask where its counters file lists it (either name): a DCGM-only machine's throttling.
    "clock_event_mask": f"{names.DCGM_CLOCK_EVENT_REASONS} or {names.DCGM_CLOCK_THROTTLE_REASONS}",
    "stress_throttled": names.STRESS_THROTTLED,
    "stress_ended_s": names.STRESS_END_TIMESTAMP_S,
    "stress_sustained_ratio": names.STRESS_SUSTAINED_RATIO,
}
#: Machine field -> its PromQL (series labelled by host only).
HOST_QUERIES: dict[str, str] = {
    # Over LOOKBACK, so a Rigscope machine that stopped answering is still known as one.
    "info": f"last_over_time({names.INFO}[{LOOKBACK}])",
    "recorder_up": names.RECORDER_UP,
    "recorder_last_write_s": names.RECORDER_LAST_WRITE_TIMESTAMP_S,
}
#: Series only a Rigscope exporter writes: a machine with any of them is a Rigscope machine.
_RIGSCOPE_ONLY = {"power_limit_w", "sm_clock_max_mhz", "slowdown_temperature_c", "vram_total_mib", "clock_event_active",
                  "stress_throttled", "stress_ended_s", "stress_sustained_ratio", "info", "recorder_up",
                  "recorder_last_write_s"}
_THROTTLE_LABELS = {label for reason, label in names.REASONS if reason & THROTTLE_REASONS}


def machine_name(labels: dict[str, str]) -> str:
    """The machine a series belongs to: ``Hostname``, else ``hostname``, else the scrape target."""
    for key in (*names.HOST_LABELS, names.INSTANCE_LABEL):
        if labels.get(key):
            return labels[key]
    return "(unnamed)"


def gpu_key(labels: dict[str, str]) -> str:
    """A GPU by identity: its UUID, else (a series without one) its index on the machine."""
    return labels.get(names.UUID_LABEL) or f"gpu{labels.get(names.GPU_INDEX_LABEL, '?')}"


@dataclass
class _Gpu:
    labels: dict[str, str]
    values: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, bool] = field(default_factory=dict)
    reasons_known: bool = False


@dataclass
class _Machine:
    rigscope: bool = False
    values: dict[str, float] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)
    gpus: dict[str, _Gpu] = field(default_factory=dict)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def read_fleet(client: PrometheusClient, *, hot_c: float, at_s: float | None = None) -> Fleet:
    """Every machine and GPU the server has now (at ``at_s``, default the server's own now: `rigscope fleet` asks
    for that, so this machine's clock does not matter), sorted by attention. ``queried_at_s`` is the server's time
    of the answer.

    ``hot_c``: a GPU at or above it is "hot" (the window's temperature alert, settings alerts.temperature_c)."""
    answers: dict[str, list[Sample]] = {}
    for key, promql in (GPU_QUERIES | HOST_QUERIES).items():
        answers[key] = rows = client.query(promql, at_s)
        if at_s is None and rows:
            at_s = rows[0].time_s  # the later queries at the same instant: one consistent picture
    queried = at_s if at_s is not None else 0.0
    return build_fleet(answers, hot_c=hot_c, server=client.shown, queried_at_s=queried, requests=client.requests)


def build_fleet(answers: dict[str, list[Sample]], *, hot_c: float, server: str, queried_at_s: float,
                requests: int) -> Fleet:
    """Group the answers (query key -> samples) into machines and GPUs."""
    machines: dict[str, _Machine] = {}
    for key, rows in answers.items():
        # The same GPU from two targets (a Rigscope exporter and a dcgm-exporter on one host): the first
        # target by name wins, whatever order the server answered in.
        for sample in sorted(rows, key=_target):
            machine = machines.setdefault(machine_name(sample.labels), _Machine())
            machine.rigscope |= key in _RIGSCOPE_ONLY
            if key in HOST_QUERIES:
                if key == "info":
                    machine.info = sample.labels
                machine.values.setdefault(key, sample.value)
                continue
            if not sample.labels.get(names.UUID_LABEL) and names.GPU_INDEX_LABEL not in sample.labels:
                continue  # not a GPU's series (a relabelling dropped them): nothing to attach it to
            gpu = machine.gpus.setdefault(gpu_key(sample.labels), _Gpu(sample.labels))
            if key == "clock_event_active":
                gpu.reasons_known = True
                reason = sample.labels.get(names.REASON_LABEL)
                if reason is not None:
                    gpu.reasons[reason] = gpu.reasons.get(reason, False) or sample.value == 1.0
            else:
                gpu.values.setdefault(key, sample.value)
            if names.GPU_INDEX_LABEL in sample.labels and names.GPU_INDEX_LABEL not in gpu.labels:
                gpu.labels = sample.labels  # the stress series carry no index: prefer a series that does
    built = [_machine(name, m, hot_c) for name, m in machines.items()]
    built.sort(key=lambda m: (attention_rank(m.attention), m.name))
    return Fleet(tuple(built), server, queried_at_s, requests)


def _target(sample: Sample) -> tuple[str, str]:
    return sample.labels.get(names.INSTANCE_LABEL, ""), sample.labels.get("job", "")


def _machine(name: str, m: _Machine, hot_c: float) -> FleetMachine:
    source: Source = "rigscope" if m.rigscope else "dcgm"
    gpus = sorted((_gpu(uuid, g, hot_c) for uuid, g in m.gpus.items()),
                  key=lambda g: (attention_rank(g.attention), _index_order(g.index), g.uuid))
    live = any(g.live for g in gpus)
    recorder = m.values.get("recorder_up")
    attention = {a for g in gpus for a in g.attention}
    if not live:
        attention.add("down")
    if recorder is not None and recorder != 1.0:
        attention.add("recorder_down")
    seen = [g.last_seen_s for g in gpus if g.last_seen_s is not None]
    return FleetMachine(
        name=name, source=source, gpus=tuple(gpus), live=live, last_seen_s=max(seen) if seen else None,
        recorder_up=None if recorder is None else recorder == 1.0,
        recorder_last_write_s=_finite(m.values.get("recorder_last_write_s")),
        data_source=m.info.get("source"), version=m.info.get("version"),
        attention=tuple(sorted(attention, key=lambda a: attention_rank((a,)))))


def _index_order(index: str | None) -> tuple[int, str]:
    return (int(index), "") if index is not None and index.isdigit() else (1 << 30, index or "")


def _gpu(uuid: str, g: _Gpu, hot_c: float) -> FleetGpu:
    def value(key: str) -> float | None:
        return _finite(g.values.get(key))

    used, free, total = value("vram_used_mib"), value("vram_free_mib"), value("vram_total_mib")
    if total is None and used is not None and free is not None:
        total = used + free
    reasons: tuple[str, ...] | None = None
    if g.reasons_known:
        reasons = tuple(sorted(r for r, active in g.reasons.items() if active and r in _THROTTLE_LABELS))
    elif (mask := value("clock_event_mask")) is not None and 0 <= mask < 1 << 32:
        reasons = tuple(sorted(label for reason, label in names.REASONS
                               if int(mask) & reason and label in _THROTTLE_LABELS))
    stress = None
    if "stress_throttled" in g.values:
        stress = StressVerdict(g.values["stress_throttled"] == 1.0, value("stress_ended_s"),
                               value("stress_sustained_ratio"))
    # Live: a reading now (the temperature query has no lookback beyond Prometheus' staleness).
    live = "temperature_c" in g.values or "utilization_pct" in g.values
    temperature = value("temperature_c")
    attention = []
    if not live:
        attention.append("down")
    if reasons:
        attention.append("throttled")
    if temperature is not None and temperature >= hot_c:
        attention.append("hot")
    if stress is not None and stress.throttled:
        attention.append("stress_throttled")
    return FleetGpu(
        uuid=uuid, index=g.labels.get(names.GPU_INDEX_LABEL), model=g.labels.get(names.MODEL_LABEL),
        utilization_pct=value("utilization_pct"), vram_used_mib=used, vram_total_mib=total,
        temperature_c=temperature, power_w=value("power_w"), power_limit_w=value("power_limit_w"),
        sm_clock_mhz=value("sm_clock_mhz"), sm_clock_max_mhz=value("sm_clock_max_mhz"),
        slowdown_temperature_c=value("slowdown_temperature_c"), throttle_reasons=reasons, last_stress=stress,
        last_seen_s=value("last_seen_s"), live=live, attention=tuple(attention))
