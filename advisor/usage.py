"""Usage accounting: GPU-hours, energy and its cost per user, per command or per container.

Pure: the caller passes the stored process samples (``ProcessUsageRows``) and each GPU's energy
over time (``GpuEnergy``); nothing here reads a clock or a file.

- **GPU-hours** are the time a key (a user, a command, a container) held memory on a GPU. Each
  process row stands for one process-polling period; several processes of one key on one GPU
  at once count that period once, so a key's GPU-hours on one GPU never exceed the wall time.
  Two keys that share a GPU each get the hour.
- **Energy** is the GPU's own (its energy counter, else power x time) over each polling period,
  split among the processes on it then by their **SM share** (per-process SM utilization). Where
  any of them has no SM figure, or all read 0 (idle processes holding memory), the split is by
  **VRAM share**; where that is missing too, evenly. Each table says which split it used and
  how much energy went each way. Energy drawn while no process held the GPU is "unattributed".
- **Busy GPU-hours** are the part of a key's GPU-hours in which the GPU was busy by the one
  definition (``advisor.busy``: utilization above the threshold) and the key's process there was a
  compute process: Xorg holding memory on a desktop at 3 % all day has GPU-hours, and no busy ones.
  Unknown (None) where the GPUs' busy seconds are not known.
- **Cost** is that energy at the electricity price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.frame import FloatArray, GpuSeries, IntArray
from advisor.stats import BoolArray, busy_seconds, energy_kwh

UsageBy = Literal["user", "command", "container"]
USAGE_BY: Final[tuple[UsageBy, ...]] = ("user", "command", "container")
#: What a row without the key is listed as.
NO_KEY: Final[dict[UsageBy, str]] = {"user": "(unknown user)", "command": "(unknown command)",
                                     "container": "(no container)"}
SplitBasis = Literal["sm", "vram", "even"]


@dataclass(frozen=True)
class ProcessUsageRows:
    """Process samples over a period: one row per (sample time, GPU, pid)."""

    time_s: FloatArray
    #: How long each row stands for (the process polling period).
    duration_s: FloatArray
    #: Index into ``gpu_uuids``.
    gpu: IntArray
    pid: IntArray
    vram_mib: FloatArray
    #: Per-process SM utilization, %; NaN where the driver did not report it.
    sm_util_pct: FloatArray
    #: Indices into ``labels``; -1 where unknown (no user, no command) or outside a container.
    user: IntArray
    command: IntArray
    container: IntArray
    labels: tuple[str, ...]
    gpu_uuids: tuple[str, ...]
    #: Per row: a compute (or mixed) process, not a graphics-only one; None where kinds are not known.
    compute: BoolArray | None = None

    def __len__(self) -> int:
        return int(self.time_s.size)


@dataclass(frozen=True)
class GpuEnergy:
    """One GPU's energy over time: row i is ``energy_wh[i]`` used in [time_s[i], time_s[i] + duration_s[i])."""

    uuid: str
    time_s: FloatArray
    duration_s: FloatArray
    energy_wh: FloatArray
    #: Busy seconds within each row (``advisor.busy``, utilization alone); None where not known.
    busy_s: FloatArray | None = None

    @classmethod
    def of(cls, gpu: GpuSeries, *, busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> GpuEnergy:
        """From a history series: the energy counter's delta, else power x time (as the weekly summary counts it)."""
        return cls(gpu.meta.uuid, gpu.time_s, gpu.duration_s, energy_kwh(gpu) * 1000.0,
                   busy_seconds(gpu, threshold_pct=busy_util_pct))

    def cumulative_at(self, times_s: FloatArray) -> FloatArray:
        """Energy used from the first row up to each time (Wh), linear within a row, flat across gaps."""
        return self._cumulative(self.energy_wh, times_s)

    def busy_cumulative_at(self, times_s: FloatArray) -> FloatArray | None:
        """Busy seconds from the first row up to each time, as ``cumulative_at``; None where not known."""
        return None if self.busy_s is None else self._cumulative(self.busy_s, times_s)

    def _cumulative(self, per_row: FloatArray, times_s: FloatArray) -> FloatArray:
        if self.time_s.size == 0:
            return np.zeros(np.shape(times_s))
        order = np.argsort(self.time_s, kind="stable")
        start = self.time_s[order]
        end = start + np.nan_to_num(self.duration_s[order])
        used = np.cumsum(np.nan_to_num(per_row[order]))
        x = np.column_stack((start, end)).ravel()
        y = np.column_stack((np.concatenate(([0.0], used[:-1])), used)).ravel()
        x = np.maximum.accumulate(x)  # rows that overlap the next one: the curve stays a function
        return np.asarray(np.interp(times_s, x, y), dtype=np.float64)


@dataclass(frozen=True)
class UsageLine:
    key: str
    gpu_hours: float
    energy_wh: float
    cost: float
    #: Distinct processes (pid per GPU) seen under this key.
    processes: int
    #: This key's part of all attributed energy, %.
    energy_share_pct: float
    #: Of ``gpu_hours``, those with the GPU busy and the key's process a compute one; None: not known.
    busy_gpu_hours: float | None = None


@dataclass(frozen=True)
class UsageTable:
    by: UsageBy
    start_s: float
    end_s: float
    lines: tuple[UsageLine, ...]
    currency: str
    price_per_kwh: float
    #: Attributed energy split by each basis (Wh): how the split was made, in numbers.
    split_wh: dict[SplitBasis, float]
    #: GPU energy in the period while no process held the GPU (Wh).
    unattributed_wh: float
    #: All GPU energy in the period (Wh).
    total_wh: float

    @property
    def attributed_wh(self) -> float:
        return float(sum(self.split_wh.values()))

    @property
    def basis(self) -> SplitBasis | Literal["mixed", "none"]:
        used = [b for b, wh in self.split_wh.items() if wh > 0]
        return "none" if not used else used[0] if len(used) == 1 else "mixed"

    def to_dict(self) -> dict[str, object]:
        """The table as plain JSON values (``rigscope usage --json``, the report's JSON)."""
        return {
            "by": self.by, "start_s": self.start_s, "end_s": self.end_s, "currency": self.currency,
            "price_per_kwh": self.price_per_kwh, "split_basis": self.basis, "split_note": self.basis_text(),
            "split_wh": {k: round(v, 4) for k, v in self.split_wh.items()},
            "attributed_wh": round(self.attributed_wh, 4), "unattributed_wh": round(self.unattributed_wh, 4),
            "total_wh": round(self.total_wh, 4),
            "lines": [{"key": line.key, "gpu_hours": round(line.gpu_hours, 4), "energy_wh": round(line.energy_wh, 4),
                       "cost": round(line.cost, 6), "processes": line.processes,
                       "energy_share_pct": round(line.energy_share_pct, 2),
                       "busy_gpu_hours": None if line.busy_gpu_hours is None else round(line.busy_gpu_hours, 4)}
                      for line in self.lines],
        }

    def basis_text(self) -> str:
        """How shared GPUs' energy was split, in one sentence for the report and the terminal."""
        total = self.attributed_wh
        if total <= 0:
            return "No energy was attributed to processes in this period."
        sm, vram, even = (100.0 * self.split_wh.get(b, 0.0) / total for b in ("sm", "vram", "even"))
        if self.basis == "sm":
            return "Energy on shared GPUs is split by each process's SM share."
        if self.basis == "vram":
            return "Energy on shared GPUs is split by VRAM share (the driver reported no per-process SM figures)."
        if self.basis == "even":
            return "Energy on shared GPUs is split evenly (neither SM nor VRAM figures were reported)."
        parts = [f"{sm:.0f} % of it by SM share"] if sm > 0 else []
        parts += [f"{vram:.0f} % by VRAM share where no SM figure was reported"] if vram > 0 else []
        parts += [f"{even:.0f} % evenly"] if even > 0 else []
        return "Energy on shared GPUs is split " + ", ".join(parts) + "."


def fmt_energy(wh: float) -> str:
    """``840 Wh``, ``12.4 kWh``."""
    if abs(wh) < 100.0:
        return f"{wh:.1f} Wh"
    return f"{wh:.0f} Wh" if abs(wh) < 1000.0 else f"{wh / 1000.0:.{1 if abs(wh) >= 10_000 else 2}f} kWh"


def fmt_cost(amount: float, currency: str) -> str:
    """``1.25 EUR``; a cost that rounds to nothing but is not nothing reads ``< 0.01 EUR``."""
    return f"< 0.01 {currency}" if 0 < amount < 0.005 else f"{amount:.2f} {currency}"


def fmt_gpu_hours(hours: float) -> str:
    """``3.2 GPU-h``, ``45 GPU-min`` below an hour."""
    return f"{hours:.1f} GPU-h" if hours >= 1.0 else f"{hours * 60.0:.0f} GPU-min"


_BASES: Final[tuple[SplitBasis, ...]] = ("sm", "vram", "even")


def _shares(group: IntArray, groups: int, sm: FloatArray, vram: FloatArray) -> tuple[FloatArray, IntArray]:
    """Each row's part of its group's energy (a group: the processes on one GPU at one poll), and the
    basis of its group (an index into ``_BASES``): SM share where every row of the group has a figure
    and they are not all 0, else VRAM share on the same terms, else even."""

    def usable(values: FloatArray) -> tuple[BoolArray, FloatArray]:
        missing = np.bincount(group, weights=(~np.isfinite(values)).astype(np.float64), minlength=groups)
        total = np.bincount(group, weights=np.nan_to_num(values), minlength=groups)
        ok: BoolArray = (missing == 0) & (total > 0)
        return ok, np.asarray(total, dtype=np.float64)

    sm_ok, sm_total = usable(sm)
    vram_ok, vram_total = usable(vram)
    count = np.bincount(group, minlength=groups).astype(np.float64)
    basis = np.where(sm_ok, 0, np.where(vram_ok, 1, 2)).astype(np.int64)
    row_basis = basis[group]
    share = np.where(row_basis == 0, np.nan_to_num(sm) / np.where(sm_ok, sm_total, 1.0)[group],
                     np.where(row_basis == 1, np.nan_to_num(vram) / np.where(vram_ok, vram_total, 1.0)[group],
                              1.0 / count[group]))
    return np.asarray(share, dtype=np.float64), row_basis


def _row_energy(rows: ProcessUsageRows, energy: dict[str, GpuEnergy], start_s: float,
                end_s: float) -> tuple[FloatArray, IntArray, float]:
    """Energy per process row (Wh), each row's split basis (index into ``_BASES``), and the GPUs' total."""
    row_wh = np.zeros(len(rows))
    row_basis = np.full(len(rows), 2, dtype=np.int64)
    total = 0.0
    for g, uuid in enumerate(rows.gpu_uuids):
        gpu = energy.get(uuid)
        mine = np.flatnonzero(rows.gpu == g)
        if gpu is not None:
            total += float(np.diff(gpu.cumulative_at(np.array([start_s, end_s])))[0])
        if mine.size == 0:
            continue
        # One group per sample time: the processes on this GPU then share its energy until the next poll.
        times, group = np.unique(rows.time_s[mine], return_inverse=True)
        group = group.reshape(-1).astype(np.int64)
        period = np.zeros(times.size)
        np.maximum.at(period, group, rows.duration_s[mine])
        ends = np.minimum(np.minimum(times + period, np.append(times[1:], np.inf)), end_s)
        starts = np.maximum(times, start_s)
        group_wh = (np.clip(gpu.cumulative_at(ends) - gpu.cumulative_at(starts), 0.0, None)
                    if gpu is not None else np.zeros(times.size))
        share, basis = _shares(group, times.size, rows.sm_util_pct[mine], rows.vram_mib[mine])
        row_wh[mine] = group_wh[group] * share
        row_basis[mine] = basis
    return row_wh, row_basis, total


def account_usage(rows: ProcessUsageRows, energy: Sequence[GpuEnergy], by: UsageBy, *, start_s: float,
                  end_s: float, price_per_kwh: float, currency: str) -> UsageTable:
    """GPU-hours, energy and cost per ``by`` key in [start_s, end_s), most energy first."""
    inside = (rows.time_s >= start_s) & (rows.time_s < end_s)
    rows = _subset(rows, inside)
    row_wh, row_basis, total_wh = _row_energy(rows, {e.uuid: e for e in energy}, start_s, end_s)
    by_basis = np.bincount(row_basis, weights=row_wh, minlength=len(_BASES))
    split: dict[SplitBasis, float] = {b: float(by_basis[i]) for i, b in enumerate(_BASES)}
    key_ix: IntArray = getattr(rows, by)
    attributed = float(row_wh.sum())
    row_busy = _row_busy_s(rows, {e.uuid: e for e in energy}, end_s)
    lines = []
    for k in np.unique(key_ix).tolist():
        mine = key_ix == k
        # GPU-hours: each (sample time, GPU) once per key, however many of its processes were there
        pairs = np.column_stack((rows.time_s[mine], rows.gpu[mine]))
        _, held, pair_of_row = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
        hours = float(np.minimum(rows.duration_s[mine][held], end_s - rows.time_s[mine][held]).sum()) / 3600.0
        busy_hours = None
        if row_busy is not None:
            # Busy once per (sample time, GPU) too: the most any of the key's processes there counts.
            per_pair = np.zeros(held.size)
            np.maximum.at(per_pair, pair_of_row.reshape(-1), row_busy[mine])
            busy_hours = float(per_pair.sum()) / 3600.0
        wh = float(row_wh[mine].sum())
        pids = len({(int(g), int(p)) for g, p in zip(rows.gpu[mine], rows.pid[mine], strict=True)})
        lines.append(UsageLine(rows.labels[k] if k >= 0 else NO_KEY[by], hours, wh, wh / 1000.0 * price_per_kwh,
                               pids, 100.0 * wh / attributed if attributed > 0 else 0.0, busy_hours))
    lines.sort(key=lambda line: (-line.energy_wh, -line.gpu_hours, line.key))
    return UsageTable(by, start_s, end_s, tuple(lines), currency, price_per_kwh, split,
                      max(total_wh - attributed, 0.0), total_wh)


def _row_busy_s(rows: ProcessUsageRows, energy: dict[str, GpuEnergy], end_s: float) -> FloatArray | None:
    """Per process row, the seconds of its period the GPU was busy and the process a compute one; None: unknown."""
    out = np.zeros(len(rows))
    for g, uuid in enumerate(rows.gpu_uuids):
        gpu = energy.get(uuid)
        mine = np.flatnonzero(rows.gpu == g)
        if mine.size == 0:
            continue
        if gpu is None or gpu.busy_s is None:
            return None
        starts = rows.time_s[mine]
        ends = np.minimum(starts + rows.duration_s[mine], end_s)
        at_start, at_end = gpu.busy_cumulative_at(starts), gpu.busy_cumulative_at(ends)
        assert at_start is not None and at_end is not None
        out[mine] = np.clip(at_end - at_start, 0.0, None)
    if rows.compute is not None:
        out = np.where(rows.compute, out, 0.0)  # a graphics-only process does no compute work
    return out


def _subset(rows: ProcessUsageRows, mask: BoolArray) -> ProcessUsageRows:
    return ProcessUsageRows(rows.time_s[mask], rows.duration_s[mask], rows.gpu[mask], rows.pid[mask],
                            rows.vram_mib[mask], rows.sm_util_pct[mask], rows.user[mask], rows.command[mask],
                            rows.container[mask], rows.labels, rows.gpu_uuids,
                            None if rows.compute is None else rows.compute[mask])
