"""One tick as JSON-ready data (what `rigscope sample --json` prints, one line per tick)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from desktop.telemetry.doctor import slowdown_headroom_c
from desktop.telemetry.envelope import explain_gpu
from desktop.telemetry.model import GPU_METRIC_NAMES, Snapshot


def snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    """One tick as JSON-ready data: every GPU metric by registry name (null where unsupported)."""
    gpus = []
    for reading in snapshot.gpus:
        entry: dict[str, Any] = {
            "index": reading.info.index,
            "name": reading.info.name,
            "uuid": reading.info.uuid,
            "state": reading.state.value,
            "state_detail": reading.state_detail,
        }
        for name in GPU_METRIC_NAMES:
            entry[name] = getattr(reading.sample, name) if reading.sample is not None else None
        # Absolute °C on every GPU, also where NVML gave it relative to the thermal limit (Ada and newer).
        entry["temp_slowdown_c"] = reading.info.temp_slowdown_c
        entry["slowdown_headroom_c"] = slowdown_headroom_c(reading.info, reading.sample)
        entry["memory_temperature_c"] = reading.memory_temperature_c  # HBM, where the GPU has the sensor
        # GPM's measured SM/tensor/DRAM activity this tick (Hopper, Blackwell), for recordings under load.
        entry["gpm"] = dataclasses.asdict(reading.activity) if reading.activity is not None else None
        entry["power_limit_w"] = reading.info.power_limit_enforced_w
        entry["power_limit_line"] = explain_gpu(reading.info, snapshot.envelope).line
        gpus.append(entry)
    return {
        "time_s": snapshot.time_s,
        "time": datetime.fromtimestamp(snapshot.time_s, UTC).isoformat(timespec="milliseconds"),
        "source": {"kind": snapshot.source.kind, "detail": snapshot.source.detail,
                   "fallback_reason": snapshot.source.fallback_reason},
        "gpus": gpus,
        "host": _plain(dataclasses.asdict(snapshot.host)) if snapshot.host is not None else None,
        "processes": [_plain(dataclasses.asdict(p)) for p in snapshot.processes],
        "processes_fresh": snapshot.processes_fresh,
        "envelope": _plain(dataclasses.asdict(snapshot.envelope)) if snapshot.envelope is not None else None,
    }


def _plain(data: dict[str, Any]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
