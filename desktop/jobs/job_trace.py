"""The GPU samples `rigscope run` took itself, per GPU index: the job's verdict and portable record read them.

The history may hold no sample of the job's GPU (the recorder watches another one, or the history could not be
written); these are the run's own, column by column, with the power limit in force at each sample
(desktop/jobs/trace_frame.py turns them into a HistoryFrame for the card).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from desktop.telemetry.model import GPU_METRIC_NAMES, Snapshot

#: What the trace keeps per GPU and sample: the sample's metrics and the power limit then in force.
_TRACE_COLUMNS = (*GPU_METRIC_NAMES, "power_limit_w")


@dataclass
class JobTrace:
    """The job's GPU samples as `rigscope run` read them, per GPU index (for the verdict and the portable record)."""

    time_s: list[float] = field(default_factory=list)
    columns: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, snapshot: Snapshot) -> None:
        row = len(self.time_s)
        self.time_s.append(snapshot.time_s)
        for reading in snapshot.gpus:
            cols = self.columns.setdefault(reading.info.index, {name: [np.nan] * row for name in _TRACE_COLUMNS})
            for name in GPU_METRIC_NAMES:
                value = getattr(reading.sample, name, None) if reading.sample is not None else None
                cols[name].append(np.nan if value is None else float(value))
            # The limit in force at this sample (a firmware mode switch during the job moves it).
            limit = reading.info.power_limit_enforced_w
            cols["power_limit_w"].append(np.nan if limit is None else float(limit))
        for cols in self.columns.values():  # a GPU missing from this snapshot
            for values in cols.values():
                if len(values) == row:
                    values.append(np.nan)

    def arrays(self, index: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cols = self.columns.get(index, {})
        return np.asarray(self.time_s, dtype=np.float64), {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
