"""Run records Rigscope wrote before the portable format, and its other JSON about one run, read as records.

`rigscope compare` and the Compare dialog read every file Rigscope writes about one run:

- the portable record (``advisor.portable``, ``"format": "rigscope-run"``): `stress -o`, `run -o`, the
  Stress page's "Export JSON…";
- the Stress page's export before it wrote the portable record (the verdict, the run's settings and
  every point: ``"verdict"``, ``"workload"``, ``"points"``, no ``"format"``);
- `rigscope jobs show ID --json` (the job's record with its card under ``"card"``): the card's figures,
  as `rigscope run -o` writes them.

Pure; the input is JSON already parsed under ``advisor.portable_read``'s limits, and every field is read
through its typed reader, so a damaged file still fails naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from advisor.portable import Environment, PortableRecord, Spread, energy_joules
from advisor.portable_read import FieldReader, PortableError

#: The point series an old Stress page export holds, and the record's spread each one fills.
_POINT_SPREADS = ("sm_clock_mhz", "temperature_c", "power_w")
#: Points an old export may hold at most (a 10-minute run at 10 Hz is 6,000).
MAX_POINTS = 200_000


def legacy_record(data: Mapping[str, Any]) -> PortableRecord | None:
    """The record in an older or another Rigscope JSON about one run; None when ``data`` is neither."""
    if isinstance(data.get("points"), dict) and isinstance(data.get("verdict"), dict) and "workload" in data:
        return _stress_export(data)
    if isinstance(data.get("card"), dict) and "argv" in data and "started_s" in data:
        return _jobs_show(data)
    return None


def _points(points: Mapping[str, Any], key: str) -> np.ndarray | None:
    values = points.get(key)
    if values is None:
        return None
    if not isinstance(values, list) or len(values) > MAX_POINTS:
        raise PortableError(f'damaged record: "points.{key}" must be a list of at most {MAX_POINTS:,} numbers')
    out = np.full(len(values), np.nan)
    for i, value in enumerate(values):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PortableError(f'damaged record: "points.{key}[{i}]" must be a number or null')
        out[i] = float(value)
    return out


def _stress_export(data: Mapping[str, Any]) -> PortableRecord:
    """The Stress page's export of a run before the portable record: judged again from nothing, read as it was."""
    r = FieldReader(dict(data))
    verdict = FieldReader(r.obj("verdict"), "verdict.")
    points = r.obj("points")
    time_s = _points(points, "time_s")
    spreads = {}
    for key in _POINT_SPREADS:
        values = _points(points, key)
        spreads[key] = Spread.of(values) if values is not None else Spread()
    started = r.number("started_s", required=True) or 0.0
    ended = r.number("ended_s")
    basis = verdict.text("basis")
    sustained = verdict.number("sustained", low=0.0) if basis in (None, "throughput") else None
    power = _points(points, "power_w")
    energy = energy_joules(time_s, power) if time_s is not None and power is not None else None
    return PortableRecord(
        kind="stress", workload=r.text("workload", required=True) or "", started_s=started,
        duration_s=max(0.0, (ended or started) - started), environment=Environment(gpu_name=r.text("gpu_name")),
        machine=None, device=r.text("device"), dtype=r.text("dtype"), unit=verdict.text("unit"),
        throughput=sustained or None, peak_throughput=verdict.number("peak", low=0.0) if sustained else None,
        latency=None, sm_clock_mhz=spreads["sm_clock_mhz"], temperature_c=spreads["temperature_c"],
        power_w=spreads["power_w"], energy_j=energy, verdict=verdict.text("status"),
        verdict_sentence=verdict.text("sentence") or "", throttled=verdict.flag("throttled"),
        errors=int(verdict.number("errors", low=0.0) or 0))


def _jobs_show(data: Mapping[str, Any]) -> PortableRecord:
    """`rigscope jobs show ID --json`: the job's card as `rigscope run -o` writes it (``record_from_job``)."""
    r = FieldReader(dict(data))
    card = FieldReader(r.obj("card"), "card.")
    gpus = r.obj("card").get("gpus")
    first = FieldReader(gpus[0] if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) else {},
                        "card.gpus.0.")
    argv = data.get("argv")
    command = " ".join(a for a in argv if isinstance(a, str)) if isinstance(argv, list) else ""
    exit_code = r.number("exit_code")
    status: str | None = None
    if r.number("ended_s") is None:
        status = "running"
    else:
        status = "completed" if exit_code == 0 else f"failed (exit {exit_code:g})" if exit_code is not None else status
    wh = card.number("energy_wh", low=0.0)
    mean = first.number("mean_power_w", low=0.0)
    top = first.number("peak_temperature_c")
    indices = data.get("gpu_indices")
    device = ",".join(str(i) for i in indices if isinstance(i, int)) if isinstance(indices, list) else None
    return PortableRecord(
        kind="job", workload=r.text("name") or command[:80] or "job", started_s=r.number("started_s", required=True)
        or 0.0, duration_s=r.number("duration_s", low=0.0) or 0.0,
        environment=Environment(gpu_name=first.text("name"), simulated=r.text("source") == "simulated"),
        machine=None, device=device or None, dtype=None,
        unit=r.text("throughput_unit") or card.text("throughput_unit"),
        throughput=card.number("throughput_mean", low=0.0),
        peak_throughput=None, latency=None, sm_clock_mhz=Spread(), temperature_c=Spread(p95=top),
        power_w=Spread(mean=mean), energy_j=wh * 3600.0 if wh is not None else None, verdict=status,
        verdict_sentence=card.text("verdict") or "", throttled=card.flag("throttled"), errors=0)
