"""`rigscope analyze`: the throttle verdict for an nvidia-smi log, or for a stored time range."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.safetext import printable
from advisor.wording import count_text
from desktop.cli.common import add_db, add_json, add_range, db_path, iso_local, time_range
from desktop.errors import UserError

if TYPE_CHECKING:
    from advisor.frame import GpuMeta
    from advisor.log_verdict import RunVerdict

HELP = "throttle verdict for an nvidia-smi log or a stored time range"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="nvidia-smi CSV log (omit to use --from/--to)")
    add_range(parser, "1 h ago")
    parser.add_argument("--gpu", type=int, default=None, metavar="INDEX",
                        help="judge only this GPU (its index in the history, or its place in the log)")
    add_db(parser)
    add_json(parser)


def main(args: argparse.Namespace) -> int:
    results = _analyze_file(Path(args.file), args.gpu) if args.file else _analyze_stored(args)
    if args.json:
        none: list[RunVerdict | None] = [None]  # a GPU with no load still gets its entry
        rows = [_run_json(label, run, meta) for label, meta, runs in results for run in (runs or none)]
        print(json.dumps(rows, default=str, indent=2))
    else:
        for label, meta, runs in results:
            print("\n".join(_run_lines(label, runs, meta)))
    return 1 if any(run.verdict.throttled for _label, _meta, runs in results for run in runs) else 0


def _no_load() -> str:
    from advisor.verdict import LOAD_UTIL_PCT

    return (f"No load in the log (GPU utilization never at or above {LOAD_UTIL_PCT:.0f} % for a few samples); "
            "nothing to judge.")


def _advice_lines(run: RunVerdict, meta: GpuMeta) -> list[str]:
    """A throttled run's action at once, with the evidence it rests on (the rules' texts; issue 24)."""
    from desktop.advice import verdict_advice

    advice = verdict_advice(run.verdict, meta)
    if advice is None:
        return []
    return [printable(f"  Evidence: {advice.evidence}"), printable(f"  Action: {advice.action}")]


def _run_lines(label: str, runs: list[RunVerdict], meta: GpuMeta) -> list[str]:
    """One line per run: "GPU 0 NVIDIA H800, run 2 of 3 (10:07:00, 4 min): Held its speed ..."."""
    from advisor.verdict_text import format_duration

    if not runs:
        return [f"{label}: {_no_load()}"]
    if len(runs) == 1:
        return [f"{label}: {runs[0].verdict.sentence}", *_advice_lines(runs[0], meta)]
    starts = [datetime.fromtimestamp(run.start_s) for run in runs]
    # The date only when the runs do not all fall on one day.
    pattern = "%H:%M:%S" if len({s.date() for s in starts}) == 1 else "%Y-%m-%d %H:%M:%S"
    lines = []
    for run, start in zip(runs, starts, strict=True):
        lines.append(f"{label}, run {run.run} of {run.runs} ({start.strftime(pattern)}, "
                     f"{format_duration(run.end_s - run.start_s)}): {run.verdict.sentence}")
        lines.extend(_advice_lines(run, meta))
    return lines


def _run_json(label: str, run: RunVerdict | None, meta: GpuMeta) -> dict[str, Any]:
    from desktop.advice import verdict_advice

    if run is None:
        return {"gpu": label, "run": None, "runs": 0, "status": "no_load", "throttled": False,
                "sentence": _no_load()}
    advice = verdict_advice(run.verdict, meta)
    return {"gpu": label, "run": run.run, "runs": run.runs, "start_s": run.start_s, "end_s": run.end_s,
            **run.verdict.as_dict(), "action": advice.action if advice else None,
            "evidence": advice.evidence if advice else None}


def _analyze_file(path: Path, gpu: int | None) -> list[tuple[str, GpuMeta, list[RunVerdict]]]:
    import numpy as np

    from advisor.log_verdict import verdicts_for_log
    from desktop.advice import gpu_meta_for

    if not path.exists():
        raise UserError(f"no such file: {printable(path)}")
    if path.is_dir():
        raise UserError(f"{printable(path)} is a folder: give an nvidia-smi CSV log inside it, "
                        "or omit FILE to judge the recorded history")
    from desktop.history.nvsmi_csv import parse_nvsmi_csv

    try:
        imported = parse_nvsmi_csv(path)
    except OSError as exc:  # no permission, a device, an I/O error
        raise UserError(f"cannot read {printable(path)}: {exc.strerror or exc}") from exc
    series = dict(imported.series)
    if not series:
        raise UserError(f"{path} holds no GPU samples (is it `nvidia-smi --query-gpu=... --format=csv` output?)")
    keys = sorted(series)
    if gpu is not None:
        if gpu >= len(keys):
            raise UserError(f"the log has {count_text(len(keys), 'GPU')}; --gpu {gpu} is not one of them")
        keys = [keys[gpu]]
    out = []
    for key in keys:
        time_s, columns = series[key]
        info = imported.info.get(key, {})
        label = _log_gpu_label(key, info, several=len(series) > 1)
        name = info["name"] if isinstance(info.get("name"), str) else None
        index = info["index"] if isinstance(info.get("index"), int) else 0
        out.append((label, gpu_meta_for(name, index), verdicts_for_log(np.asarray(time_s), dict(columns),
                                            sm_clock_max_mhz=_number(info.get("sm_clock_max_mhz")),
                                            power_limit_w=_number(info.get("power_limit_enforced_w")),
                                            power_limit_source="log", gpu_name=name)))
    return out


def _log_gpu_label(key: str, info: dict[str, Any], *, several: bool) -> str:
    """"GPU 0 NVIDIA A10" with an index column; the log's name without one ("NVIDIA A10", the key
    beside it only to tell several GPUs apart); the key ("pci:...") only when the log names nothing."""
    name = printable(info["name"]) if info.get("name") else ""
    if "index" in info:
        return f"GPU {info['index']} {name}".strip()
    if name:
        return f"{name} ({printable(key)})" if several else name
    return printable(key)


def _number(value: object) -> float | None:
    import numpy as np

    return float(value) if isinstance(value, int | float) and np.isfinite(value) else None


def _limit_per_row(stored: Any, last_read_w: float | None) -> Any:
    """The stored limit per row; the GPU's last one read where nothing is stored."""
    import numpy as np

    return np.where(np.isfinite(stored), stored, np.nan if last_read_w is None else last_read_w)


def _analyze_stored(args: argparse.Namespace) -> list[tuple[str, GpuMeta, list[RunVerdict]]]:
    from advisor.causes import CAUSE_COUNTER_FIELDS
    from advisor.frame import held_most
    from advisor.log_verdict import verdicts_for_log
    from desktop.advice import gpu_meta_for
    from desktop.history.store import QUERYABLE, HistoryStore

    path = db_path(args)
    if not path.exists():
        raise UserError(f"no history at {path}: record some first, or pass an nvidia-smi log FILE")
    start, end = time_range(args, 3600.0)
    store = HistoryStore.open(path, readonly=True)
    try:
        gpus = store.gpus()
        if args.gpu is not None:
            gpus = [g for g in gpus if g.index == args.gpu]
            if not gpus:
                raise UserError(f"the history has no GPU {args.gpu}")
        metrics = ["utilization_gpu_pct", "sm_clock_mhz", "temperature_c", "power_w", "clock_event_reasons"]
        # NVML's exact time under each throttle cause, where this history stores it.
        metrics += [name for name in CAUSE_COUNTER_FIELDS.values() if name in QUERYABLE]
        out = []
        samples = 0
        for info in gpus:
            # The limit in force at each sample (schema v11's stored changes), and over most of the range.
            rows = store.query(info.uuid, [*metrics, "power_limit_w"], start, end, max_points=100_000)
            samples += len(rows.time_s)
            columns = dict(rows.columns)
            columns["power_limit_w"] = _limit_per_row(columns["power_limit_w"], info.power_limit_enforced_w)
            limit_w = held_most(columns["power_limit_w"], rows.duration_s) or info.power_limit_enforced_w
            meta = gpu_meta_for(info.name, info.index, is_laptop=getattr(info, "is_laptop", None),
                                power_limit_settable=getattr(info, "power_limit_settable", None),
                                power_limit_w=limit_w)
            out.append((f"GPU {info.index} {info.name}", meta,
                        verdicts_for_log(rows.time_s, columns, sm_clock_max_mhz=info.sm_clock_max_mhz,
                                         power_limit_w=limit_w, gpu_name=info.name,
                                         temp_slowdown_c=info.temp_slowdown_c)))
        if samples == 0:  # nothing to judge is not "held its speed": say so (exit 2)
            span = store.time_range()
            held = (f"it holds {iso_local(span[0])} .. {iso_local(span[1])}" if span is not None
                    else "it holds no samples yet")
            raise UserError(f"no samples in {path} between {iso_local(start)} and {iso_local(end)} ({held}); "
                            "choose the range with --from/--to")
        return out
    finally:
        store.close()
