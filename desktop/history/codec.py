"""Conversions between telemetry objects / numpy columns and the integer rows of the store."""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import sqlite3
import struct
from collections.abc import Collection, Sequence
from itertools import chain
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from desktop.history.layout import GPU_SCALES, HOST_SCALES
from desktop.telemetry.model import GPU_METRIC_NAMES, GpuInfo, GpuProcess, GpuSample, HostSample

FloatArray = npt.NDArray[np.float64]

#: Beyond this a scaled value does not fit SQLite's 64-bit integers: it is garbage, stored as missing.
_INT_LIMIT = 2.0**62
PROCESS_KINDS: tuple[str, ...] = ("compute", "graphics", "mixed")
_HOST_FIELDS = tuple(HOST_SCALES)
# attrgetter, not dataclasses.astuple: astuple deep-copies every field (20x slower per sample).
_HOST_VALUES = operator.attrgetter(*_HOST_FIELDS)
_HOST_SCALE_LIST = [HOST_SCALES[f] for f in _HOST_FIELDS]


def db_text(text: str) -> str | bytes:
    """``text`` as SQLite can store it, losslessly.

    psutil and ``os`` decode /proc with ``surrogateescape`` and JSON may carry ``\\ud800``:
    such a ``str`` holds lone surrogates, which sqlite3 cannot encode (``UnicodeEncodeError``,
    and the whole transaction with it). Those strings are stored as a BLOB of their
    ``surrogatepass`` UTF-8 bytes; every other string as TEXT. ``text_from_db`` undoes it.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
    return text


def text_from_db(value: str | bytes | None) -> str | None:
    """The ``str`` that ``db_text`` stored (a BLOB from another writer that is not UTF-8 is kept byte for byte)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return bytes(value).decode("utf-8", "surrogateescape")


def to_ms(time_s: float) -> int:
    return round(time_s * 1000.0)


def scaled(value: float | int | bool | None, scale: int) -> int | None:
    if value is None:
        return None
    number = float(value) * scale
    return round(number) if -_INT_LIMIT < number < _INT_LIMIT else None


def gpu_sample_from_row(row: Sequence[Any]) -> GpuSample:
    """A GpuSample from the metric columns of a row (in registry order)."""
    out: dict[str, float | int | None] = {}
    for name, raw in zip(GPU_METRIC_NAMES, row, strict=True):
        scale = GPU_SCALES[name]
        if raw is None:
            out[name] = None
        elif name in ("clock_event_reasons", "pcie_gen", "pcie_width", "pstate"):
            out[name] = int(raw)
        else:
            out[name] = raw / scale
    return GpuSample(**out)  # type: ignore[arg-type]


def host_row(time_s: float, host: HostSample) -> tuple[Any, ...]:
    return (to_ms(time_s), *(scaled(v, s) for v, s in zip(_HOST_VALUES(host), _HOST_SCALE_LIST, strict=True)),
            _cores_blob(host.cpu_per_core_pct))


@functools.lru_cache(maxsize=4096)
def _cores_blob(per_core: tuple[float, ...]) -> bytes:
    """Per-core CPU % as int16 x10 (memoised: idle cores and simulated hosts repeat the same tuple)."""
    return struct.pack(f"<{len(per_core)}h", *(max(-32768, min(32767, round(v * 10))) for v in per_core))


def host_sample_from_row(row: Sequence[Any]) -> HostSample:
    values: dict[str, Any] = {}
    for name, raw in zip(_HOST_FIELDS, row[: len(_HOST_FIELDS)], strict=True):
        if raw is None:
            values[name] = None
        elif name == "on_ac_power":
            values[name] = bool(raw)
        else:
            values[name] = raw / HOST_SCALES[name]
    blob = row[len(_HOST_FIELDS)] or b""
    values["cpu_per_core_pct"] = tuple(float(v) / 10 for v in np.frombuffer(blob, dtype="<i2"))
    return HostSample(**values)


HOST_COLUMNS = ", ".join((*_HOST_FIELDS, "cpu_per_core"))

#: The INSERTs the rows above are made for (a row already stored at the same key is kept; the GPU
#: samples' are in ``packing``).
INSERT_HOST = (f"INSERT OR IGNORE INTO host_samples (ts, {HOST_COLUMNS}) "
               f"VALUES ({', '.join('?' * (2 + len(HOST_SCALES)))})")
INSERT_PROC = ("INSERT OR IGNORE INTO process_samples (ts, gpu, pid, name_id, user_id, vram_mib, kind, cpu_pct, "
               "started_ms, own, sm_util_pct, mem_util_pct, enc_util_pct, dec_util_pct, command_id, container_id) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
#: Per-process utilization columns (schema v8), stored in 0.1 %; NULL: n/a (never 0).
PROCESS_UTIL_FIELDS: Final = ("sm_util_pct", "mem_util_pct", "enc_util_pct", "dec_util_pct")


def process_row(ts_ms: int, gpu_id: int, proc: GpuProcess, name_id: int,
                string_ids: tuple[int | None, int | None, int | None]) -> tuple[Any, ...]:
    """One process_samples row; ``name_id`` and ``string_ids`` (user, command, container) are ``strings`` ids."""
    user_id, command_id, container_id = string_ids
    return (ts_ms, gpu_id, proc.pid, name_id, user_id, scaled(proc.vram_mib, 10), PROCESS_KINDS.index(proc.kind),
            scaled(proc.cpu_pct, 10), None if proc.started_s is None else to_ms(proc.started_s), int(proc.own),
            *(scaled(getattr(proc, f), 10) for f in PROCESS_UTIL_FIELDS), command_id, container_id)


def info_to_json(info: GpuInfo) -> str:
    return json.dumps(dataclasses.asdict(info), sort_keys=True)


def info_from_json(text: str) -> GpuInfo:
    data = json.loads(text)
    known = {f.name for f in dataclasses.fields(GpuInfo)}
    return GpuInfo(**{k: v for k, v in data.items() if k in known})


def ts_bounds(conn: sqlite3.Connection, table: str, gpu_id: int | None = None) -> tuple[int, int] | None:
    """(min(ts), max(ts)) of ``table`` (of one GPU where given), or None when it has no rows.

    Two single-aggregate queries: SQLite answers a lone min() or max() from the (gpu, ts) key in one
    index step, but ``SELECT min(ts), max(ts)`` walks every row of the GPU (issue 38: 0.35 s of a week
    report on a 42-day history)."""
    where, params = ("WHERE gpu = ?", (gpu_id,)) if gpu_id is not None else ("", ())
    lo = conn.execute(f"SELECT min(ts) FROM {table} {where}", params).fetchone()[0]
    if lo is None:
        return None
    hi = conn.execute(f"SELECT max(ts) FROM {table} {where}", params).fetchone()[0]
    return int(lo), int(hi)


def int_column(values: npt.ArrayLike, scale: int) -> list[int | None]:
    """A float column (NaN = missing) as the scaled Python ints / None that SQLite stores."""
    arr = np.asarray(values, dtype=np.float64) * scale
    # NaN is missing; so is anything an int64 column cannot hold (garbage, never a reading).
    mask = ~(np.abs(arr) < 2.0**62)
    ints = np.rint(np.where(mask, 0.0, arr)).astype(np.int64)
    if not mask.any():
        return ints.tolist()  # type: ignore[no-any-return]
    obj = ints.astype(object)
    obj[mask] = None
    return obj.tolist()  # type: ignore[no-any-return]


#: Stands for NULL on the way out of SQLite (history tables hold integers, never this).
_NULL = 1e308


def fetch_columns(conn: sqlite3.Connection, columns: Sequence[str], source: str, params: Sequence[Any],
                  order_by: str, *, not_null: Collection[str] = ()) -> FloatArray:
    """``SELECT columns FROM source ORDER BY order_by`` as a float64 matrix, SQL NULL as NaN.

    The values stream from the cursor straight into one numpy buffer (no list of row tuples,
    no per-row conversion), which takes about a third of the time ``np.array(fetchall())`` does.
    """
    exprs = [c if c in not_null else f"coalesce({c}, {_NULL})" for c in columns]
    cursor = conn.execute(f"SELECT {', '.join(exprs)} FROM {source} ORDER BY {order_by}", params)
    out = np.fromiter(chain.from_iterable(cursor), dtype=np.float64).reshape(-1, len(columns))
    if len(not_null) < len(columns):
        out[out == _NULL] = np.nan
    return out
