"""The report as text and as files: the JSON and the CSV of a ``ReportData``, and any format's file written
whole or not at all (``write_beside``; the HTML and PDF are rendered by ``desktop.ui.report.reports``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from advisor.safetext import printable
from advisor.summary import WEEKDAYS
from desktop.advice import advice_json, json_safe, recommendation_dict
from desktop.csvsafe import CsvWriter
from desktop.reporting import ReportData


def to_json(data: ReportData) -> str:
    summary = dataclasses.asdict(data.summary)
    summary["recommendations"] = [recommendation_dict(r) for r in data.summary.recommendations]
    # The change and its unit as the HTML shows them: a percentage changes by percentage points.
    for change, row in zip(data.summary.changes, summary["changes"], strict=True):
        row.update(delta=change.delta, delta_unit=change.delta_unit)
    payload = {"week": data.week_label, "generated_s": data.generated_s, "notes": list(data.notes),
               "summary": json_safe(summary), "advice": advice_json(data.advice),
               "who_used_the_gpu": [table.to_dict() for table in data.who], "who_notes": list(data.who_notes)}
    # ASCII only: a name's ESC, C1 control, bidi override or lone surrogate is written as its \\u escape,
    # so `report --format json -o -` is safe on a terminal and any reader gets the exact name back.
    return json.dumps(payload, indent=2, ensure_ascii=True)


def to_csv(data: ReportData) -> str:
    """Long format: section, gpu, item, value, unit (one figure a line, easy to pivot).

    The gpu column is the index; where a slot held two cards it is "index (uuid)". Text cells are
    ``printable`` (a process named ``py\\x1b]0;…`` shows the escape, never the byte, so `-o -` is safe
    on a terminal) and go through ``desktop.csvsafe`` (a process may be named ``=cmd|...``)."""
    out = io.StringIO()
    w = CsvWriter(out)
    w.writerow(["section", "gpu", "item", "value", "unit"])
    slots = Counter(g.index for g in data.summary.gpus)

    def row(*cells: Any) -> None:
        w.writerow(printable(c) if isinstance(c, str) else c for c in cells)

    if data.summary.demo:  # first, as the HTML report's note: a spreadsheet of the demo week says so
        row("note", "", "demo", "Demo data: a simulated week, not your GPU.", "")

    for g in data.summary.gpus:
        gpu: int | str = g.index if slots[g.index] == 1 else f"{g.index} ({g.uuid})"
        row("gpu", gpu, "name", g.name, "")
        row("gpu", gpu, "busy", round(g.busy_hours, 3), "h")
        row("gpu", gpu, "mean utilization while busy", round(g.mean_util_busy_pct, 2), "%")
        row("gpu", gpu, "energy", round(g.energy_kwh, 4), "kWh")
        row("gpu", gpu, "energy cost", round(g.energy_cost, 4), data.summary.currency)
        row("gpu", gpu, "peak temperature", g.peak_temp_c, "°C")
        row("gpu", gpu, "p95 temperature", g.p95_temp_c, "°C")
        row("gpu", gpu, "throttled: any cause", round(g.throttled_minutes, 2), "min")
        for cause, minutes in g.throttle_minutes.items():
            row("gpu", gpu, f"throttled: {cause}", round(minutes, 2), "min")
        row("gpu", gpu, "throttled: of it HW thermal", round(g.hw_thermal_minutes, 2), "min")
        row("gpu", gpu, "VRAM peak", g.vram_peak_mib, "MiB")
        row("gpu", gpu, "VRAM above 90 %", round(g.vram_above_90_minutes, 2), "min")
        for d, day in enumerate(WEEKDAYS):
            for h, value in enumerate(g.heatmap_pct[d]):
                row("heatmap", gpu, f"{day} {h:02d}:00", round(value, 2) if math.isfinite(value) else "", "%")
    for p in data.summary.top_processes:
        row("process", p.gpu_index, p.name, round(p.gpu_hours, 3), "GPU-h")
    for table in data.who:
        for line in table.lines:
            row(f"who by {table.by}", "", f"{line.key}: GPU time", round(line.gpu_hours, 3), "GPU-h")
            row(f"who by {table.by}", "", f"{line.key}: energy", round(line.energy_wh, 2), "Wh")
            row(f"who by {table.by}", "", f"{line.key}: energy cost", round(line.cost, 4), table.currency)
    for c in data.summary.changes:
        row("change", c.gpu_index, c.label, round(c.delta, 3), c.delta_unit)
    for r in data.summary.recommendations:
        row("recommendation", "" if r.gpu_index is None else r.gpu_index, f"{r.severity}: {r.title}", r.rule_id, "")
    for cost in data.advice.costs:
        row("cost", cost.gpu_name, "owned per month", round(cost.owned_month, 2), data.advice.currency)
        for o in cost.options:
            row("cost", cost.gpu_name, f"{o.offer.gpu_model} at {o.offer.provider}, on demand per month",
                round(o.on_demand_month, 2), "USD")
    return out.getvalue()


def _umask() -> int:
    """The process's umask without changing it (os.umask sets it: not thread-safe); 022 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_beside(path: Path, write: Callable[[Path], None]) -> None:
    """Make ``path`` whole or not at all: ``write(temporary)`` fills a file beside it (same folder, so the
    rename is atomic), which then replaces ``path`` (``os.replace``). A symlink at ``path`` is replaced by
    the file, never followed (what it points to is untouched); a write that fails (a full disk) leaves the
    old file as it was and no partial one. The new file gets the old one's permissions, else the umask's."""
    try:
        mode = os.lstat(path).st_mode & 0o777 if path.is_file() and not path.is_symlink() else None
    except OSError:
        mode = None
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        os.chmod(temporary, mode if mode is not None else 0o666 & ~_umask())
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_report_text(path: Path, text: str) -> None:
    """A report's text (HTML, JSON, CSV) into ``path`` through ``write_beside``, flushed to the disk."""
    data = memoryview(text.encode("utf-8"))

    def write(temporary: Path) -> None:
        fd = os.open(temporary, os.O_WRONLY | os.O_TRUNC)
        try:
            view = data
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    write_beside(path, write)
