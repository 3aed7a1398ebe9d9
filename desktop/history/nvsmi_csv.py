"""Read logs written by ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] -l N``.

Any subset and order of fields is understood, with or without units in the header
(``memory.used [MiB]``) or in the values (``1234 MiB``); ``[N/A]`` and ``[Not Supported]``
are missing values; clock-event reasons come as hex masks
(``clocks_event_reasons.active``, or the older ``clocks_throttle_reasons.active``) or as
per-reason Active / Not Active columns. GPUs are told apart by uuid, else pci.bus_id,
else index. A line that cannot be read is skipped with its number and the reason;
it never stops the rest. A sample outside 1990-01-01 .. now + 1 day (a clock that was
wrong, a hand-edited log) is such a line: year 0 or 9999 in the history would break every
reader of it. ``history.logfile`` reads the file (encodings, a cap on a line's length).
``parse_nvsmi_csv`` needs no database; ``history.importer`` writes the result into the store.
"""

from __future__ import annotations

import array
import csv
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from advisor.clock_events import REASON_TABLE
from desktop.history.logfile import MAX_LINE_BYTES, LogLines, Unreadable
from desktop.history.nvsmi_values import BadValue, Clock, is_missing, parse_number, parse_reading
from desktop.safeio import open_stream
from desktop.telemetry.model import GPU_METRIC_NAMES

FloatArray = npt.NDArray[np.float64]

#: nvidia-smi field -> GpuSample field.
SAMPLE_FIELDS: dict[str, str] = {
    "utilization.gpu": "utilization_gpu_pct",
    "utilization.memory": "utilization_mem_pct",
    "memory.used": "vram_used_mib",
    "memory.free": "vram_free_mib",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_w",
    "power.draw.average": "power_w",
    # The instantaneous draw spikes far past the limit (774 W on a 700 W H800): read, never stored as power.
    "power.draw.instant": "power_instant_w",
    "temperature.memory": "memory_temperature_c",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.memory": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
    "fan.speed": "fan_pct",
    "pcie.link.gen.current": "pcie_gen",
    "pcie.link.gen.gpucurrent": "pcie_gen",
    "pcie.link.width.current": "pcie_width",
    "pstate": "pstate",
    "clocks_event_reasons.active": "clock_event_reasons",
    "clocks_throttle_reasons.active": "clock_event_reasons",
}
#: nvidia-smi field -> GpuInfo field (static facts, last value seen wins).
INFO_FIELDS: dict[str, str] = {
    "index": "index",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "name": "name",
    "gpu_name": "name",
    "pci.bus_id": "pci_bus_id",
    "gpu_bus_id": "pci_bus_id",
    "driver_version": "driver_version",
    "vbios_version": "vbios_version",
    "memory.total": "vram_total_mib",
    "enforced.power.limit": "power_limit_enforced_w",
    "power.limit": "power_limit_enforced_w",
    "power.default_limit": "power_limit_default_w",
    "power.min_limit": "power_limit_min_w",
    "power.max_limit": "power_limit_max_w",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.max.graphics": "sm_clock_max_mhz",
    "clocks.max.memory": "mem_clock_max_mhz",
    "clocks.max.mem": "mem_clock_max_mhz",
    "pcie.link.gen.max": "pcie_gen_max",
    "pcie.link.width.max": "pcie_width_max",
    "persistence_mode": "persistence_mode",
}
#: The limit columns, read per row as well (``"power_limit_w"``: the limit in force at each sample, for
#: the verdict; it moves on laptops under Dynamic Boost) besides the static fact ``power_limit_enforced_w``.
LIMIT_FIELDS: frozenset[str] = frozenset(("enforced.power.limit", "power.limit"))
#: Where several columns of a log fill one field, the lower rank wins where it has a value (the
#: others fill in): the 1 s average over ``power.draw`` (the same average on Ampere and newer, the
#: instantaneous value on older boards), the enforced limit over the requested one. Never the
#: largest or the last column of them.
FIELD_RANK: dict[str, int] = {"power.draw.average": 0, "power.draw": 1, "enforced.power.limit": 0, "power.limit": 1}
#: Per-reason columns (after ``clocks_event_reasons.`` or ``clocks_throttle_reasons.``) -> bit.
REASON_FIELDS: dict[str, int] = {row.nvsmi: int(row.reason) for row in REASON_TABLE if row.nvsmi is not None}
_TEXT_INFO = frozenset(("uuid", "name", "pci_bus_id", "driver_version", "vbios_version"))
_INT_INFO = frozenset(("index", "pcie_gen_max", "pcie_width_max"))
#: Rows an import holds before writing them (``parse_lines``' ``sink``): ~10 MB of columns.
CHUNK_ROWS = 100_000


def _field_name(header_cell: str) -> str:
    """``"memory.used [MiB]"`` -> ``"memory.used"``."""
    return header_cell.split("[", 1)[0].strip().lower()




@dataclass
class _GpuLog:
    info: dict[str, Any] = field(default_factory=dict)
    time_s: array.array[float] = field(default_factory=lambda: array.array("d"))
    columns: dict[str, array.array[float]] = field(default_factory=dict)


@dataclass
class ImportResult:
    """What a log held: per-GPU series, static facts, and every skipped line with its reason."""

    #: gpu key (uuid, else ``pci:<bus id>``, else ``index:<n>``) -> (time_s, {GpuSample field: values}), plus
    #: ``"power_limit_w"`` (the enforced limit in force at each row) where the log has a limit column.
    series: dict[str, tuple[FloatArray, dict[str, FloatArray]]] = field(default_factory=dict)
    #: gpu key -> GpuInfo field values read from the log (index, uuid, name, pci_bus_id, ...).
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[tuple[int, str]] = field(default_factory=list)
    #: Data rows read (valid lines), over all GPUs.
    rows: int = 0
    #: Rows newly written to the database (set by the importer; 0 when only parsed).
    imported: int = 0
    #: The nvidia-smi fields found in the header(s).
    fields: list[str] = field(default_factory=list)
    #: Fields of the header(s) Rigscope does not read at all (``clocks.gr``, ``ecc.errors...``).
    ignored: list[str] = field(default_factory=list)
    #: Fields read (``analyze`` uses them) that the history has no column for: the importer drops them.
    unstored: list[str] = field(default_factory=list)
    source: str = ""
    #: What the reader could not settle but stored anyway (an hour a DST change ran twice, one pass seen).
    notes: list[str] = field(default_factory=list)
    #: GPU keys whose rows were handed to a ``sink`` and left ``series`` (a log read in chunks).
    written_keys: list[str] = field(default_factory=list)

    def gpu_keys(self) -> list[str]:
        """Every GPU the log held, whether its rows are still in ``series`` or went to a sink."""
        return sorted({*self.series, *self.written_keys})


class _Layout:
    """What each column of the current header means."""

    def __init__(self, cells: list[str]) -> None:
        self.names = [_field_name(c) for c in cells]
        #: The unit in each header cell's brackets (``[mW]`` -> ``mw``), ``""`` where none.
        self.units = [c.partition("[")[2].partition("]")[0].strip().lower() for c in cells]
        self.width = len(cells)
        self.time_col = self.names.index("timestamp") if "timestamp" in self.names else None
        self.sample = _ranked([(i, SAMPLE_FIELDS[n]) for i, n in enumerate(self.names) if n in SAMPLE_FIELDS],
                              self.names)
        # Read in reverse rank, so the best column of a field is written last and stands.
        self.info = _ranked([(i, INFO_FIELDS[n]) for i, n in enumerate(self.names) if n in INFO_FIELDS],
                            self.names)[::-1]
        # The enforced limit first, the requested one only where it is missing (FIELD_RANK).
        self.limits = _ranked([(i, "power_limit_w") for i, n in enumerate(self.names) if n in LIMIT_FIELDS],
                              self.names)
        self.reasons = []
        for i, n in enumerate(self.names):
            prefix, _, reason = n.partition(".")
            if prefix in ("clocks_event_reasons", "clocks_throttle_reasons") and reason in REASON_FIELDS:
                self.reasons.append((i, REASON_FIELDS[reason]))
        self.has_mask = any(f == "clock_event_reasons" for _, f in self.sample)
        self.key_col = next((i for f in ("uuid", "pci_bus_id", "index") for i, g in self.info if g == f), None)

    @staticmethod
    def looks_like_header(cells: list[str]) -> bool:
        names = [_field_name(c) for c in cells]
        known = sum(1 for n in names if n == "timestamp" or n in SAMPLE_FIELDS or n in INFO_FIELDS
                    or n.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")))
        return known >= max(1, len(names) // 2)


def _ranked(columns: list[tuple[int, str]], names: list[str]) -> list[tuple[int, str]]:
    """``(column, field)`` pairs, the best-ranked column of each field first (see ``FIELD_RANK``)."""
    return sorted(columns, key=lambda pair: FIELD_RANK.get(names[pair[0]], 1))


def _known_field(name: str) -> bool:
    prefix, _, reason = name.partition(".")
    return (name == "timestamp" or name in SAMPLE_FIELDS or name in INFO_FIELDS
            or (prefix in ("clocks_event_reasons", "clocks_throttle_reasons") and reason in REASON_FIELDS))


def _split(line: str) -> list[str]:
    if '"' in line:
        return next(csv.reader([line]), [])
    return line.split(",")


def _consumed(lines: Iterable[str], chars: int) -> int:
    """Bytes read so far: the reader's count for a file, characters for a list of lines."""
    return lines.bytes_read if isinstance(lines, LogLines) else chars


def _hand_over(result: ImportResult, logs: dict[str, _GpuLog], sink: Callable[[ImportResult], object]) -> None:
    """Give the rows read so far to ``sink`` and forget them: memory stays that of one chunk (issue 38)."""
    _merge(result, logs)
    logs.clear()
    sink(result)
    result.written_keys.extend(k for k in result.series if k not in result.written_keys)
    result.series.clear()


def parse_lines(lines: Iterable[str], result: ImportResult, progress: Callable[[int], None] | None = None,
                *, now_s: float | None = None, sink: Callable[[ImportResult], object] | None = None,
                chunk_rows: int = CHUNK_ROWS) -> None:
    """Parse nvidia-smi CSV ``lines`` into ``result`` (several calls may share one result).

    ``now_s`` ends the sane span of sample times (now + 1 day); tests pass a fixed instant. With ``sink``,
    every ``chunk_rows`` rows are merged into ``result.series``, handed to it and dropped (the importer writes
    them), so a log of any length is read in the memory of one chunk."""
    layout: _Layout | None = None
    clock = Clock(time.time() if now_s is None else now_s)
    logs: dict[str, _GpuLog] = {}
    pending = 0
    chars = 0
    for line_no, raw_line in enumerate(lines, start=1):
        chars += len(raw_line) + 1
        if progress is not None and line_no % 4096 == 0:
            progress(_consumed(lines, chars))
        if isinstance(raw_line, Unreadable):
            result.skipped.append((line_no, str(raw_line)))
            if raw_line.fatal:
                break
            continue
        if len(raw_line) > MAX_LINE_BYTES:  # lines handed over as a list: the file reader caps its own
            result.skipped.append((line_no, f"longer than {MAX_LINE_BYTES // 1024} KiB: not an nvidia-smi line"))
            continue
        line = raw_line.strip().lstrip("\ufeff")
        if not line or line.startswith("#"):
            continue
        try:
            cells = [c.strip() for c in _split(line)]
        except csv.Error as exc:
            result.skipped.append((line_no, f"unreadable CSV ({exc})"))
            continue
        # Once a usable header is known, only another one with timestamps replaces it: a stray
        # line that happens to be a field name must not make the rows after it unreadable.
        if (layout is None or layout.time_col is None or any(_field_name(c) == "timestamp" for c in cells)) \
                and _Layout.looks_like_header(cells):
            layout = _Layout(cells)
            result.fields.extend(n for n in layout.names if n not in result.fields)
            result.ignored.extend(n for n in layout.names if not _known_field(n) and n not in result.ignored)
            result.unstored.extend(n for n in layout.names if n in SAMPLE_FIELDS
                                   and SAMPLE_FIELDS[n] not in GPU_METRIC_NAMES and n not in result.unstored)
            if layout.time_col is None:
                result.skipped.append((line_no, "header has no timestamp field; its rows cannot be placed in time"))
            continue
        if layout is None:
            result.skipped.append((line_no, "data before any header line (log written with noheader?)"))
            continue
        if layout.time_col is None:
            result.skipped.append((line_no, "no timestamp field in the header"))
            continue
        if len(cells) != layout.width:
            result.skipped.append((line_no, f"{len(cells)} fields where the header has {layout.width}"))
            continue
        try:
            time_s = clock.parse(cells[layout.time_col])
            values: dict[str, float | None] = {}
            for i, name in layout.sample:  # best-ranked column first: a later one only fills a gap
                if values.get(name) is None:
                    values[name] = parse_reading(cells[i], name, layout.names[i], layout.units[i])
            for i, _name in layout.limits:
                if values.get("power_limit_w") is None:
                    values["power_limit_w"] = parse_reading(cells[i], "power_limit_enforced_w", layout.names[i],
                                                            layout.units[i])
            if layout.reasons and not layout.has_mask:
                bits = [(bit, parse_number(cells[i])) for i, bit in layout.reasons]
                known = [(bit, v) for bit, v in bits if v is not None]
                values["clock_event_reasons"] = float(sum(bit for bit, v in known if v)) if known else None
            info: dict[str, Any] = {}
            for i, name in layout.info:
                text = cells[i]
                if is_missing(text):
                    continue
                if name in _TEXT_INFO:
                    info[name] = text
                elif name == "persistence_mode":
                    info[name] = text.lower() == "enabled"
                else:
                    number = parse_reading(text, name, layout.names[i], layout.units[i])
                    info[name] = int(number) if name in _INT_INFO and number is not None else number
        except BadValue as exc:
            result.skipped.append((line_no, str(exc)))
            continue
        key_text = cells[layout.key_col] if layout.key_col is not None else "0"
        key_field = layout.info[[i for i, _ in layout.info].index(layout.key_col)][1] if layout.key_col is not None \
            else "index"
        key = key_text if key_field == "uuid" else f"{'pci' if key_field == 'pci_bus_id' else 'index'}:{key_text}"
        gpu = logs.setdefault(key, _GpuLog())
        gpu.info.update(info)
        n = len(gpu.time_s)
        gpu.time_s.append(time_s)
        for name, value in values.items():
            column = gpu.columns.get(name)
            if column is None:
                column = gpu.columns[name] = array.array("d", [float("nan")] * n)
            column.append(np.nan if value is None else value)
        for name, column in gpu.columns.items():
            if name not in values:
                column.append(np.nan)
        result.rows += 1
        pending += 1
        if sink is not None and pending >= chunk_rows:
            _hand_over(result, logs, sink)
            pending = 0
    if progress is not None:
        progress(_consumed(lines, chars))
    result.notes.extend(note for note in clock.fold_notes() if note not in result.notes)
    if sink is not None:
        _hand_over(result, logs, sink)
    else:
        _merge(result, logs)


def _merge(result: ImportResult, logs: dict[str, _GpuLog]) -> None:
    """Sort each GPU's rows by time, drop repeated timestamps, and add them to ``result``."""
    for key, gpu in logs.items():
        times = np.frombuffer(gpu.time_s, dtype=np.float64).copy()
        cols = {n: np.frombuffer(c, dtype=np.float64).copy() for n, c in gpu.columns.items()}
        if key in result.series:
            old_t, old_c = result.series[key]
            times = np.concatenate([old_t, times])
            cols = {n: np.concatenate([old_c.get(n, np.full(len(old_t), np.nan)), cols.get(n, np.full(
                len(times) - len(old_t), np.nan))]) for n in {*old_c, *cols}}
        order = np.argsort(times, kind="stable")
        times = times[order]
        keep = np.r_[True, np.diff(times) > 0] if len(times) else np.zeros(0, dtype=bool)
        result.series[key] = (times[keep], {n: c[order][keep] for n, c in cols.items()})
        result.info.setdefault(key, {}).update(gpu.info)


def parse_nvsmi_csv(path_or_lines: str | Path | Iterable[str],
                    progress: Callable[[int], None] | None = None, *, now_s: float | None = None,
                    sink: Callable[[ImportResult], object] | None = None, chunk_rows: int = CHUNK_ROWS) -> ImportResult:
    """Parse one log (a path, or its lines) without touching any database; ``now_s``, ``sink`` and
    ``chunk_rows`` as in ``parse_lines``."""
    result = ImportResult()
    if isinstance(path_or_lines, (str, Path)) and not (isinstance(path_or_lines, str) and "\n" in path_or_lines):
        path = Path(path_or_lines)
        result.source = str(path)
        with open_stream(path) as handle:  # a FIFO nobody writes to must not hang import
            parse_lines(LogLines(handle), result, progress, now_s=now_s, sink=sink, chunk_rows=chunk_rows)
    elif isinstance(path_or_lines, str):
        parse_lines(path_or_lines.splitlines(), result, progress, now_s=now_s, sink=sink, chunk_rows=chunk_rows)
    else:
        parse_lines(path_or_lines, result, progress, now_s=now_s, sink=sink, chunk_rows=chunk_rows)
    return result
