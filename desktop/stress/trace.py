"""A stress run's trace: the time, the throughput and the GPU's telemetry, one row per sample.

The runner (desktop.stress.runner) adds a row at each sample as plain lists (``TraceRecorder``)
and turns them into float64 arrays once at the end; a run without telemetry (the CPU, or CUDA
with no NVML) takes the child's own once-a-second records as its trace (``child_trace``). The
columns are named like ``GpuSample``'s fields, plus the power limit in force at each sample.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from desktop.stress.run_model import FloatArray
from desktop.telemetry.model import GpuSample

SAMPLE_FIELDS = tuple(f.name for f in fields(GpuSample))
#: The enforced power limit in force at each sample (the GPU's info as the backend re-read it: it moves with
#: Dynamic Boost, the firmware mode and the battery), so the verdict judges each moment at its own limit.
LIMIT_COLUMN = "power_limit_w"

Trace = tuple[FloatArray, FloatArray, dict[str, FloatArray]]


class TraceRecorder:
    """Collects samples as plain lists; turned into numpy arrays once at the end."""

    def __init__(self) -> None:
        self.time_s: list[float] = []
        self.throughput: list[float] = []
        self.columns: dict[str, list[float]] = {name: [] for name in (*SAMPLE_FIELDS, LIMIT_COLUMN)}

    def add(self, time_s: float, throughput: float | None, sample: GpuSample | None,
            limit_w: float | None = None) -> None:
        self.time_s.append(time_s)
        self.throughput.append(np.nan if throughput is None else throughput)
        for name in SAMPLE_FIELDS:
            value = getattr(sample, name) if sample is not None else None
            self.columns[name].append(np.nan if value is None else float(value))
        self.columns[LIMIT_COLUMN].append(np.nan if limit_w is None else float(limit_w))

    def arrays(self) -> Trace:
        return (np.asarray(self.time_s, dtype=np.float64), np.asarray(self.throughput, dtype=np.float64),
                {k: np.asarray(v, dtype=np.float64) for k, v in self.columns.items()})


def child_trace(started: float, points: list[tuple[float, float]]) -> Trace:
    """No telemetry to align with: the child's own (seconds since its start, throughput) records are the trace."""
    time_s = started + np.asarray([t for t, _ in points], dtype=np.float64)
    throughput = np.asarray([v for _, v in points], dtype=np.float64)
    columns = {name: np.full(time_s.shape[0], np.nan) for name in (*SAMPLE_FIELDS, LIMIT_COLUMN)}
    return time_s, throughput, columns
