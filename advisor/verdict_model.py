"""What the throttle verdict reads (``RunTrace``: a run's samples and the GPU's limits) and answers (``Verdict``).

Plain frozen dataclasses, kept apart from the judging (``verdict``) and its words
(``verdict_text``), which both read them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from advisor.causes import CAUSE_COUNTER_FIELDS, Cause, CauseFamily, CauseTiming, VerdictCause
from advisor.clock_reference import ClockBasis
from advisor.forecast import TemperatureForecast
from advisor.power_cap import PowerCapKind

FloatArray = npt.NDArray[np.float64]

#: What a verdict says of a run: "aborted" is set by the stress run's record (a run that stopped
#: early), the others by ``judge``; "inconclusive": held its speed while still heating.
VerdictStatus = Literal["passed", "throttled", "errors", "aborted", "no_data", "too_short", "inconclusive"]
#: The performance signal judged: the workload's throughput, else the SM clock.
Basis = Literal["throughput", "clock"]
#: Where the max clock came from: the GPU's own report, or the highest clock in the log.
ClockMaxSource = Literal["reported", "log"]
#: Where the power limit came from: NVML, a limit column of the log, the datasheet (by the GPU's name), or the
#: user (``analyze --power-limit``).
PowerLimitSource = Literal["reported", "log", "datasheet", "given"]


@dataclass(frozen=True)
class RunTrace:
    """What the verdict reads: per-sample arrays (NaN = unknown) plus the GPU's limits."""

    time_s: FloatArray
    throughput: FloatArray | None = None
    unit: str = ""
    sm_clock_mhz: FloatArray | None = None
    temperature_c: FloatArray | None = None
    power_w: FloatArray | None = None
    clock_event_reasons: FloatArray | None = None
    utilization_gpu_pct: FloatArray | None = None
    #: cause (a key of CAUSE_COUNTER_FIELDS) -> NVML's exact seconds under it since the previous sample.
    cause_time_s: Mapping[Cause, FloatArray] | None = None
    sm_clock_max_mhz: float | None = None
    #: Where the max clock came from: "reported" (the GPU's) or "log" (the highest clock in the log).
    sm_clock_max_source: ClockMaxSource = "reported"
    power_limit_w: float | None = None
    #: The enforced power limit in force at each sample (W, NaN = unknown): a laptop's moves (Dynamic Boost,
    #: firmware modes, battery); from a column named "power_limit_w" (a log's per-row limit, the history's).
    power_limit_series_w: FloatArray | None = None
    #: Where the limit came from: "reported" (NVML), "log" (a limit column) or "datasheet" (by ``gpu_name``).
    power_limit_source: PowerLimitSource = "reported"
    gpu_name: str | None = None
    #: The clock the GPU held at full load in its own stress run (``advisor.clock_reference``), if known.
    sm_clock_calibration_mhz: float | None = None
    #: The datasheet boost clock for ``gpu_name``, if known: the reference of last resort.
    sm_clock_boost_mhz: float | None = None
    temp_slowdown_c: float | None = None
    errors: int = 0
    checks: int = 0

    @classmethod
    def from_columns(cls, time_s: FloatArray, columns: Mapping[str, FloatArray], **kwargs: object) -> RunTrace:
        """From arrays named like GpuSample fields (history, nvidia-smi import, simulator, stress runner)."""

        def col(name: str) -> FloatArray | None:
            values = columns.get(name)
            return None if values is None else np.asarray(values, dtype=np.float64)

        counters = {cause: np.asarray(columns[name], dtype=np.float64)
                    for cause, name in CAUSE_COUNTER_FIELDS.items() if columns.get(name) is not None}
        if "power_limit_series_w" not in kwargs and columns.get("power_limit_w") is not None:
            kwargs = {**kwargs, "power_limit_series_w": col("power_limit_w")}
        return cls(time_s=np.asarray(time_s, dtype=np.float64), sm_clock_mhz=col("sm_clock_mhz"),
                   temperature_c=col("temperature_c"), power_w=col("power_w"),
                   clock_event_reasons=col("clock_event_reasons"), utilization_gpu_pct=col("utilization_gpu_pct"),
                   cause_time_s=counters or None, **kwargs)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Verdict:
    """The answer: throttled or not, since when, by how much, why — and one plain sentence."""

    status: VerdictStatus
    throttled: bool
    onset_s: float | None
    peak: float
    sustained: float
    sustained_ratio: float
    unit: str
    basis: Basis
    clock_ratio: float | None  # sustained SM clock / clock_reference_mhz (information, not a verdict)
    cause: VerdictCause | None
    cause_family: CauseFamily | None
    onset_temperature_c: float | None
    #: Share of the load time under each cause (and "unexplained": slow with no reason).
    cause_shares: dict[VerdictCause, float] = field(default_factory=dict)
    errors: int = 0
    checks: int = 0
    duration_s: float = 0.0
    sentence: str = ""
    comparison: str = ""
    #: Seconds under load (samples judged), and under each cause while loaded.
    load_s: float = 0.0
    cause_seconds: dict[Cause, float] = field(default_factory=dict)
    #: "counters" (NVML's exact time under each reason), "samples" (1 Hz reason bits) or "none".
    cause_timing: CauseTiming = "none"
    power_limited: bool = False
    sm_clock_max_mhz: float | None = None
    sm_clock_max_source: ClockMaxSource | None = None
    #: The clock ``clock_ratio`` is measured against and what it is (``advisor.clock_reference``).
    clock_reference_mhz: float | None = None
    clock_reference_basis: ClockBasis | None = None
    #: How the run met its power limit (``power_cap.PowerCap.kind``); ``power_limited`` is true for any of them.
    power_cap: PowerCapKind | None = None
    #: Averaged power under load (W), the limit it was judged against and where that came from.
    power_level_w: float | None = None
    power_limit_w: float | None = None
    power_limit_source: PowerLimitSource | None = None
    #: Share of the load time at >= 95 % of the limit.
    power_at_limit_share: float | None = None
    #: °C per minute the temperature still rose over the end of the run (a least-squares slope); None: unknown.
    rising_c_per_min: float | None = None
    #: A bf16 GEMM's dense peak for this GPU at its limit in force (advisor.dense_peak), and what it came from.
    dense_peak_tflops: float | None = None
    dense_peak_source: str | None = None
    #: Where the limit moved during the run: one entry per limit in force, in time order (``limit_series.LimitStep``
    #: as a dict: start_s, end_s, limit_w, power_level_w, power_cap); empty when one limit held throughout.
    power_limit_steps: list[dict[str, object]] = field(default_factory=list)
    #: A stress run's forecast of where its temperature settles (``advisor.forecast``), or why there is none.
    forecast: TemperatureForecast | None = None
    forecast_unavailable: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v.as_json()
                    if isinstance(v, TemperatureForecast) else v) for k, v in self.__dict__.items()}
