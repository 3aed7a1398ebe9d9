"""What the history's table modules use of ``store.HistoryStore``, as a typing Protocol.

There is one store object, ``HistoryStore``. The table modules (``query``, ``host_query``,
``usage_query``, ``rollup``, ``blocks``, ``stress_runs``, ``jobs``, ``bulk``, ``frames``,
``snapshot_rows``, and the ``store_jobs`` mixin) are its private parts: ``HistoryStore`` calls them and
nothing outside ``desktop.history`` imports them (import-linter's "protected" contract). They cannot
name ``HistoryStore`` in their signatures, since ``store`` imports them and the package has no import
circles, type-only ones included (tests/unit/test_architecture.py); they name this Protocol, which
``HistoryStore`` satisfies (mypy checks it where ``store`` hands itself to them). Nothing here runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from advisor.frame import Event
from desktop.history.dbfile import Transaction
from desktop.telemetry.model import GpuInfo, GpuProcess


class StoreApi(Protocol):
    """An open history database: ``HistoryStore`` as its table modules see it."""

    conn: sqlite3.Connection
    path: Path
    readonly: bool

    def transaction(self) -> Transaction: ...

    def meta(self, key: str, default: str | None = None) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    @property
    def is_demo(self) -> bool: ...

    def gpus(self) -> list[GpuInfo]: ...

    def gpu_id(self, uuid: str) -> int | None: ...

    def gpu_uuid_of_id(self) -> dict[int, str]: ...

    def ensure_gpu(self, info: GpuInfo, time_s: float) -> int: ...

    def string_id(self, text: str) -> int: ...

    def process_string_ids(self, proc: GpuProcess) -> tuple[int | None, int | None, int | None]: ...

    def strings_by_id(self, ids: Sequence[int]) -> dict[int, str]: ...

    def add_event(self, time_s: float, kind: str, gpu_uuid: str | None, detail: str = "") -> None: ...

    def events(self, start_s: float, end_s: float, kinds: Sequence[str] | None = None) -> list[Event]: ...
