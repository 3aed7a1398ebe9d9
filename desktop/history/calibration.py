"""Each GPU's full-load calibration from its own newest stress run, for the effective-load estimate.

A run counts when it measured something (``advisor.baseline.usable``) in TFLOP/s and kept its
power and SM clock series: its settled mean power at its mean clock, with the sustained
TFLOP/s beside them. The idle power stays the datasheet's (a stress run never idles).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from advisor.baseline import usable
from advisor.effective_load import Calibration, from_stress_run
from desktop.errors import UserError
from desktop.history.store import HistoryStore
from desktop.telemetry.effective_load import datasheet_calibration
from desktop.telemetry.model import GpuInfo

_UNIT = "TFLOP/s"


def stress_calibrations(db: HistoryStore) -> dict[str, Calibration]:
    """GPU uuid -> the calibration from its newest usable TFLOP/s stress run (GPUs without one are absent)."""
    out: dict[str, Calibration] = {}
    for info in db.gpus():
        cal = stress_calibration(db, info)
        if cal is not None:
            out[info.uuid] = cal
    return out


def stress_calibration(db: HistoryStore, info: GpuInfo) -> Calibration | None:
    """The calibration of the GPU ``info`` describes from its newest usable TFLOP/s stress run; None without one
    (a GPU the recorder never saw counts too: the stress verdict's clock reference asks for the GPU it ran on)."""
    datasheet = datasheet_calibration(info)
    if datasheet is None:
        return None
    for run in db.stress_runs(gpu_uuid=info.uuid):  # newest first
        if run.unit != _UNIT or not usable(run):
            continue
        _, series = db.stress_points(run.run_id)
        if "power_w" not in series or "sm_clock_mhz" not in series:
            continue
        cal = from_stress_run(datasheet.idle_w, series["power_w"], series["sm_clock_mhz"], run.sustained_throughput)
        if cal is not None:
            return cal
    return None


def load_calibration(path: Path, info: GpuInfo) -> Calibration | None:
    """``stress_calibration`` from the database at ``path``; None when there is none (or it cannot be read)."""
    if not path.exists():
        return None
    try:
        with HistoryStore.open(path, readonly=True) as store:
            return stress_calibration(store, info)
    except (sqlite3.Error, OSError, UserError):  # damaged, newer or locked: the run's own early level serves
        return None


def load_calibrations(path: Path) -> dict[str, Calibration]:
    """``stress_calibrations`` of the database at ``path``; empty when there is none (or it cannot be read)."""
    if not path.exists():
        return {}
    try:
        with HistoryStore.open(path, readonly=True) as store:
            return stress_calibrations(store)
    except (sqlite3.Error, OSError, UserError):  # damaged, newer or locked: the datasheet serves; the writer
        # (which moves a damaged file aside) or the reader reports the file, not this early look
        return {}
