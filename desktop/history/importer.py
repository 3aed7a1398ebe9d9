"""Import parsed nvidia-smi logs into the history store, matching GPUs it already knows.

A GPU is matched by uuid when the log has one, else by PCI bus id (a log from this machine).
A log with neither carries only ``index``, which says nothing about which machine it came
from: index 0 of a laptop and index 0 of a cloud box must not become one GPU. Such GPUs are
filed under a machine name, the log's file name unless ``--machine NAME`` gives one (so logs
of one machine, rotated daily, can be filed together), as uuid ``NVSMI-<machine>-index:<n>``.
Re-importing the same file therefore adds nothing, as for any log.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from desktop.history.bulk import write_gpu_columns
from desktop.history.nvsmi_csv import ImportResult
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuInfo

_GPU_INFO_FIELDS = {f.name for f in dataclasses.fields(GpuInfo)}


def needs_machine(result: ImportResult) -> bool:
    """True when some GPU of the log is known by its index only."""
    return any(key.startswith("index:") for key in result.gpu_keys())


def machine_of(result: ImportResult, machine: str | None) -> str:
    """The machine name index-only GPUs of ``result`` are filed under."""
    return machine or Path(result.source).stem or "log"


class KnownGpus:
    """The store's GPUs, read once per import (a lookup per log GPU, not a reload: 2,000 GPUs stay linear)."""

    def __init__(self, store: HistoryStore) -> None:
        self.by_uuid: dict[str, GpuInfo] = {}
        self.by_bus: dict[str, GpuInfo] = {}
        for info in store.gpus():
            self.add(info)

    def add(self, info: GpuInfo) -> None:
        self.by_uuid.setdefault(info.uuid, info)
        if info.pci_bus_id:
            self.by_bus.setdefault(info.pci_bus_id.lower(), info)

    def resolve(self, key: str, facts: dict[str, Any], machine: str) -> GpuInfo:
        """The stored GPU this log's ``key`` is (by uuid, then PCI bus id), else a new GpuInfo from the log."""
        uuid = facts.get("uuid")
        bus = facts.get("pci_bus_id")
        if uuid and uuid in self.by_uuid:
            return self.by_uuid[uuid]
        if not uuid and bus and str(bus).lower() in self.by_bus:
            return self.by_bus[str(bus).lower()]
        values = {k: v for k, v in facts.items() if k in _GPU_INFO_FIELDS}
        if not uuid:
            uuid = f"NVSMI-{machine}-{key}" if key.startswith("index:") else f"NVSMI-{key}"
            if uuid in self.by_uuid:  # the same file (or machine) imported before
                return self.by_uuid[uuid]
        values["uuid"] = uuid
        values.setdefault("index", 0)
        values.setdefault("name", "GPU (from an nvidia-smi log)")
        return GpuInfo(**values)


def _limit_per_row(time_s: Any, columns: dict[str, Any], facts: dict[str, Any]) -> Any:
    """The limit in force per row: the log's column (nvsmi_csv's ``power_limit_w``), else the log's one limit (not
    the stored GPU's: a matched GPU's info is what it read last, the log says what held then), else None."""
    if columns.get("power_limit_w") is not None:
        return columns["power_limit_w"]
    limit = facts.get("power_limit_enforced_w")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        return np.full(len(time_s), float(limit))
    return None


def import_result(store: HistoryStore, result: ImportResult, *, machine: str | None = None) -> int:
    """Write every GPU series of ``result``; returns (and adds to ``result.imported``) the rows newly stored:
    called once per chunk when the log is read in chunks (``parse_nvsmi_csv``'s ``sink``).

    ``machine`` names the machine index-only GPUs are filed under (default: the log's file name)."""
    known = KnownGpus(store)
    name = machine_of(result, machine)
    imported = 0
    for key, (time_s, columns) in result.series.items():
        facts = result.info.get(key, {})
        info = known.resolve(key, facts, name)
        # Columns the history has no place for (the instantaneous power, ...) are the parser's
        # ``unstored``: read for ``analyze``, not stored.
        stored = {column: values for column, values in columns.items() if column in GPU_METRIC_NAMES}
        imported += write_gpu_columns(store, info, time_s, stored, power_limit_w=_limit_per_row(time_s, columns, facts))
        known.add(info)
    result.imported += imported
    return imported
