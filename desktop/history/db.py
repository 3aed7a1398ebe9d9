"""The core every history module builds on: one open connection, its transactions, metadata, and
the small lookup tables (GPUs, strings, events) that readers and writers share.

``HistoryDb`` holds a connection someone else opened (``HistoryStore.open`` creates, migrates,
recovers or refuses the file). It caches the ``gpus`` and ``strings`` rows, so a write resolves
a GPU or a process name without a query; a rolled-back transaction empties the caches, since
they may then name rows that were never committed. The range readers (``query``,
``host_query``, ``blocks``, ``frames``), the writers (``bulk``, ``rollup``) and
``stress_runs`` take a ``HistoryDb``; ``store.HistoryStore`` is one, plus opening and
snapshot writing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from advisor.frame import Event
from desktop.history import codec
from desktop.history.dbfile import Transaction
from desktop.telemetry.model import GpuInfo, GpuProcess


@dataclass(slots=True)
class CachedGpu:
    """One ``gpus`` row as the writer last stored it (it compares each new reading with this)."""

    id: int
    info: GpuInfo
    #: The ``DeviceState`` value stored last.
    state: str
    #: Throttle reasons seen in the open throttle episode (0: no episode open).
    throttle_mask: int


class HistoryDb:
    """An open history database. Not thread-safe: use it from one thread (or via HistoryWriter)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, readonly: bool, recovered_from: Path | None) -> None:
        self.conn = conn
        self.path = path
        self.readonly = readonly
        #: Where a corrupt file found at ``path`` was moved to, when that happened at open.
        self.recovered_from = recovered_from
        self._gpu_cache: dict[str, CachedGpu] = {}
        self._strings: dict[str, int] = {}
        self._load_gpus()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def transaction(self) -> Transaction:
        return Transaction(self.conn, self._reset_caches)

    def _reset_caches(self) -> None:
        """After a rollback the caches may name rows that were never committed."""
        self._gpu_cache.clear()
        self._strings.clear()
        self._load_gpus()

    # --- metadata ----------------------------------------------------------------------

    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    @property
    def is_demo(self) -> bool:
        """True for the database `rigscope demo` writes (everything in it is simulated)."""
        return self.meta("demo") == "1"

    # --- GPUs --------------------------------------------------------------------------

    def _load_gpus(self) -> None:
        for gid, uuid, info_json, state, mask in self.conn.execute(
                "SELECT id, uuid, info_json, state, throttle_mask FROM gpus"):
            key = codec.text_from_db(uuid) or ""
            self._gpu_cache[key] = CachedGpu(int(gid), codec.info_from_json(info_json), state, int(mask))

    def gpus(self) -> list[GpuInfo]:
        self._gpu_cache.clear()
        self._load_gpus()
        return sorted((entry.info for entry in self._gpu_cache.values()), key=lambda i: (i.index, i.uuid))

    def gpu_id(self, uuid: str) -> int | None:
        entry = self._gpu_cache.get(uuid)
        if entry is None:
            self._load_gpus()
            entry = self._gpu_cache.get(uuid)
        return entry.id if entry else None

    def gpu_uuid_of_id(self) -> dict[int, str]:
        return {entry.id: uuid for uuid, entry in self._gpu_cache.items()}

    def ensure_gpu(self, info: GpuInfo, time_s: float) -> int:
        """The row id for ``info.uuid``, inserting or updating its static info (emits change events)."""
        entry = self._gpu_cache.get(info.uuid)
        if entry is not None and (entry.info is info or entry.info == info):
            return entry.id
        info_json = codec.info_to_json(info)
        if entry is None:
            cur = self.conn.execute(
                "INSERT INTO gpus (uuid, idx, name, info_json, first_seen_s, last_seen_s) VALUES (?, ?, ?, ?, ?, ?)",
                (codec.db_text(info.uuid), info.index, codec.db_text(info.name), info_json, time_s, time_s))
            gid = int(cur.lastrowid or 0)
            self._gpu_cache[info.uuid] = CachedGpu(gid, info, "ok", 0)
            return gid
        old = entry.info
        if old != info:
            if old.driver_version and info.driver_version and old.driver_version != info.driver_version:
                self.add_event(time_s, "driver_change", info.uuid, f"{old.driver_version} -> {info.driver_version}")
            if old.vbios_version and info.vbios_version and old.vbios_version != info.vbios_version:
                self.add_event(time_s, "vbios_change", info.uuid, f"{old.vbios_version} -> {info.vbios_version}")
            self.conn.execute("UPDATE gpus SET idx = ?, name = ?, info_json = ? WHERE id = ?",
                              (info.index, codec.db_text(info.name), info_json, entry.id))
            entry.info = info
        return entry.id

    # --- strings (process names, users) ----------------------------------------------------

    def string_id(self, text: str) -> int:
        """The ``strings`` id of ``text``, stored losslessly whatever it holds (``codec.db_text``):
        a process name with a non-UTF-8 byte costs nothing but its own row."""
        sid = self._strings.get(text)
        if sid is None:
            stored = codec.db_text(text)
            self.conn.execute("INSERT OR IGNORE INTO strings (text) VALUES (?)", (stored,))
            sid = int(self.conn.execute("SELECT id FROM strings WHERE text = ?", (stored,)).fetchone()[0])
            self._strings[text] = sid
        return sid

    def process_string_ids(self, proc: GpuProcess) -> tuple[int | None, int | None, int | None]:
        """The ``strings`` ids of a process's user, command and container (None where it has none)."""
        user, command, container = (None if text is None else self.string_id(text)
                                    for text in (proc.user, proc.command, proc.container))
        return user, command, container

    def string_table(self) -> dict[int, str]:
        return {int(i): codec.text_from_db(t) or "" for i, t in self.conn.execute("SELECT id, text FROM strings")}

    def strings_by_id(self, ids: Sequence[int]) -> dict[int, str]:
        """The texts of ``strings`` rows ``ids`` (the whole table when that is cheaper than asking)."""
        if len(ids) > 500:
            return self.string_table()
        if not ids:
            return {}
        return {int(i): codec.text_from_db(t) or "" for i, t in self.conn.execute(
            f"SELECT id, text FROM strings WHERE id IN ({', '.join('?' * len(ids))})", list(ids))}

    # --- events ------------------------------------------------------------------------

    def add_event(self, time_s: float, kind: str, gpu_uuid: str | None, detail: str = "") -> None:
        self.conn.execute("INSERT INTO events (ts, kind, gpu_uuid, detail) VALUES (?, ?, ?, ?)",
                          (time_s, kind, None if gpu_uuid is None else codec.db_text(gpu_uuid), codec.db_text(detail)))

    def events(self, start_s: float, end_s: float, kinds: Sequence[str] | None = None) -> list[Event]:
        """Events in [start_s, end_s), oldest first, optionally of some kinds only."""
        sql = "SELECT ts, kind, gpu_uuid, detail FROM events WHERE ts >= ? AND ts < ?"
        params: list[Any] = [start_s, end_s]
        if kinds is not None:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            params += list(kinds)
        rows = self.conn.execute(sql + " ORDER BY ts, id", params).fetchall()
        return [Event(time_s=t, kind=k, gpu_uuid=codec.text_from_db(u), detail=codec.text_from_db(d) or "")
                for t, k, u, d in rows]
