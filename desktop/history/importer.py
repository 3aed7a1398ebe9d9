"""Import parsed nvidia-smi logs into the history store, matching GPUs it already knows."""

from __future__ import annotations

import dataclasses
from typing import Any

from desktop.history.bulk import write_gpu_columns
from desktop.history.nvsmi_csv import ImportResult
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuInfo

_GPU_INFO_FIELDS = {f.name for f in dataclasses.fields(GpuInfo)}


def resolve_gpu(store: HistoryStore, key: str, facts: dict[str, Any]) -> GpuInfo:
    """The stored GPU this log's ``key`` is (by uuid, then PCI bus id), else a new GpuInfo from the log."""
    known = store.gpus()
    uuid = facts.get("uuid")
    bus = facts.get("pci_bus_id")
    for info in known:
        if uuid and info.uuid == uuid:
            return info
    if not uuid and bus:
        for info in known:
            if info.pci_bus_id and info.pci_bus_id.lower() == str(bus).lower():
                return info
    values = {k: v for k, v in facts.items() if k in _GPU_INFO_FIELDS}
    values["uuid"] = uuid or f"NVSMI-{key}"
    values.setdefault("index", 0)
    values.setdefault("name", "GPU (from an nvidia-smi log)")
    return GpuInfo(**values)


def import_result(store: HistoryStore, result: ImportResult) -> int:
    """Write every GPU series of ``result``; returns (and records in it) the rows newly stored."""
    imported = 0
    for key, (time_s, columns) in result.series.items():
        info = resolve_gpu(store, key, result.info.get(key, {}))
        imported += write_gpu_columns(store, info, time_s, columns)
    result.imported = imported
    return imported
