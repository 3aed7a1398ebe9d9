"""What the fleet reader returns: machines and their GPUs now, each with why it needs attention (no I/O).

Units are in the names (``_pct``, ``_mib``, ``_c``, ``_w``, ``_mhz``, ``_s``: Unix time for timestamps);
``None`` is "not known" (a DCGM-only machine has no throttle reasons, limits, stress verdict or recorder),
never 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Source = Literal["rigscope", "dcgm"]

#: Why a machine or GPU needs attention, most urgent first (the table's and the JSON's sort order):
#: no GPU reading now, throttled now, hot, its recorder not writing, its last stress test throttled.
ATTENTION: tuple[str, ...] = ("down", "throttled", "hot", "recorder_down", "stress_throttled")

#: What a DCGM-only machine cannot say (dcgm-exporter's default counters have no such series).
DCGM_ONLY_MISSING: tuple[str, ...] = ("throttle reasons", "power limit", "max SM clock", "last stress verdict",
                                      "recorder health")


@dataclass(frozen=True)
class StressVerdict:
    """The last stress test a Rigscope exporter serves for a GPU."""

    throttled: bool
    ended_s: float | None
    sustained_ratio: float | None


@dataclass(frozen=True)
class FleetGpu:
    uuid: str
    index: str | None
    model: str | None
    utilization_pct: float | None = None
    vram_used_mib: float | None = None
    vram_total_mib: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    slowdown_temperature_c: float | None = None
    #: Throttling reasons active now (labels as the exporter writes them); None: not known (DCGM-only).
    throttle_reasons: tuple[str, ...] | None = None
    last_stress: StressVerdict | None = None
    #: When Prometheus last scraped a reading of this GPU (Unix time).
    last_seen_s: float | None = None
    #: True while the GPU has a reading now (its target answers).
    live: bool = False
    attention: tuple[str, ...] = ()

    @property
    def throttled(self) -> bool | None:
        return None if self.throttle_reasons is None else bool(self.throttle_reasons)


@dataclass(frozen=True)
class FleetMachine:
    name: str
    source: Source
    gpus: tuple[FleetGpu, ...]
    #: True while at least one of its GPUs has a reading now.
    live: bool
    last_seen_s: float | None
    #: None: no recorder (`rigscope serve`, or DCGM-only).
    recorder_up: bool | None = None
    recorder_last_write_s: float | None = None
    #: Rigscope's ``rigscope_info`` source ("nvml", "simulated"); None for DCGM-only.
    data_source: str | None = None
    version: str | None = None
    attention: tuple[str, ...] = ()

    @property
    def missing(self) -> tuple[str, ...]:
        """The columns this machine cannot fill: a DCGM-only machine's, said so rather than shown as 0 (throttle
        reasons are there where its dcgm-exporter serves the clock-event mask for every GPU)."""
        if self.source != "dcgm":
            return ()
        reasons_known = bool(self.gpus) and all(g.throttle_reasons is not None for g in self.gpus)
        return tuple(m for m in DCGM_ONLY_MISSING if not (reasons_known and m == "throttle reasons"))


@dataclass(frozen=True)
class Fleet:
    """Every machine the Prometheus server knows of, most in need of attention first."""

    machines: tuple[FleetMachine, ...]
    #: The server (no credentials), when it was asked (Unix time), and how many requests the reading took.
    server: str
    queried_at_s: float
    requests: int

    def to_dict(self) -> dict[str, Any]:
        """The ``rigscope fleet --json`` document."""
        return {
            "prometheus": self.server, "queried_at_s": self.queried_at_s, "requests": self.requests,
            "machines": [_machine_dict(m) for m in self.machines],
        }


def _machine_dict(machine: FleetMachine) -> dict[str, Any]:
    out = {k: v for k, v in asdict(machine).items() if k != "gpus"}
    out["attention"] = list(machine.attention)
    out["missing"] = list(machine.missing)
    out["gpus"] = [_gpu_dict(g) for g in machine.gpus]
    return out


def _gpu_dict(gpu: FleetGpu) -> dict[str, Any]:
    out = asdict(gpu)
    out["throttled"] = gpu.throttled
    out["throttle_reasons"] = None if gpu.throttle_reasons is None else list(gpu.throttle_reasons)
    out["attention"] = list(gpu.attention)
    return out


def attention_rank(attention: tuple[str, ...]) -> int:
    """The position of the most urgent reason in ``ATTENTION`` (len(ATTENTION) for none): the sort key."""
    return min((ATTENTION.index(a) for a in attention), default=len(ATTENTION))
