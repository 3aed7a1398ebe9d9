"""`rigscope analyze`: the throttle verdict for an nvidia-smi log, or for a stored time range."""

from __future__ import annotations

import argparse
import json
import math
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
    from advisor.verdict_model import PowerLimitSource

HELP = "throttle verdict for an nvidia-smi log or a stored time range"
#: A --power-limit above this is a typo (the largest board limit known is the GH200's 900 W; a whole node is not a GPU).
MAX_POWER_LIMIT_W = 2000.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="nvidia-smi CSV log (omit to use --from/--to)")
    add_range(parser, "1 h ago")
    parser.add_argument("--gpu", default=None, metavar="INDEX|NAME",
                        help="digits: judge only this GPU (its index in the history, or its place in the log); "
                             "a name (e.g. 'NVIDIA H100 PCIe'): the GPU's model, for its datasheet power limit "
                             "where the log has no limit column; an unknown name says the close ones")
    parser.add_argument("--power-limit", type=_watts, default=None, metavar="W", dest="power_limit_w",
                        help="the GPU's enforced power limit in W, for a log that has none (it replaces any "
                             "limit the log or the history holds; the sentence says it was given)")
    add_db(parser)
    add_json(parser)


def _watts(text: str) -> float:
    """argparse ``type`` of ``--power-limit``: a positive number of watts (else exit 2)."""
    try:
        watts = float(text.strip().removesuffix("W").removesuffix("w"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not a number of watts") from None
    if not math.isfinite(watts) or not 0.0 < watts <= MAX_POWER_LIMIT_W:
        raise argparse.ArgumentTypeError(f"{text.strip()} W is not a power limit (0 .. {MAX_POWER_LIMIT_W:.0f} W)")
    return watts


def gpu_choice(text: str | None) -> tuple[int | None, str | None]:
    """``--gpu``: digits are an index; anything else a datasheet name (an unknown one: exit 2 with the close ones)."""
    if text is None:
        return None, None
    if text.strip().isdigit():
        return int(text.strip()), None
    from advisor.gpu_names import close_datasheet_names, resolve_datasheet_name

    name = resolve_datasheet_name(text)
    if name is not None:
        return None, name
    if "laptop" in text.lower():  # none is in the table: the nearest desktop name would mislead
        raise UserError(f"--gpu {printable(text)!r}: a laptop GPU has no datasheet power limit (it moves with the "
                        "machine and its power mode): give the limit with --power-limit W")
    close = close_datasheet_names(text)
    hint = f"did you mean {', '.join(close)}?" if close else "`rigscope analyze --help` says how to choose one"
    raise UserError(f"--gpu {printable(text)!r}: no GPU of that name in the datasheet table; {hint} "
                    "(digits choose a GPU by its index)")


def main(args: argparse.Namespace) -> int:
    index, name = gpu_choice(args.gpu)
    if args.file:
        results = _analyze_file(Path(args.file), index, gpu_name=name, power_limit_w=args.power_limit_w)
    else:
        results = _analyze_stored(args, index, gpu_name=name)
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


def _analyze_file(path: Path, gpu: int | None, *, gpu_name: str | None = None, power_limit_w: float | None = None
                  ) -> list[tuple[str, GpuMeta, list[RunVerdict]]]:
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
        # The name the user gave wins over the log's: it is there to say what the log does not.
        name = gpu_name or (info["name"] if isinstance(info.get("name"), str) else None)
        index = info["index"] if isinstance(info.get("index"), int) else 0
        limit, columns = _number(info.get("power_limit_enforced_w")), dict(columns)
        source: PowerLimitSource = "log"
        if power_limit_w is not None:  # the user's figure replaces the log's limit, the per-row one too
            limit, source = power_limit_w, "given"
            columns.pop("power_limit_w", None)
        out.append((label, gpu_meta_for(name, index), verdicts_for_log(np.asarray(time_s), columns,
                                            sm_clock_max_mhz=_number(info.get("sm_clock_max_mhz")),
                                            power_limit_w=limit, power_limit_source=source, gpu_name=name)))
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


def _analyze_stored(args: argparse.Namespace, gpu: int | None, *, gpu_name: str | None = None
                    ) -> list[tuple[str, GpuMeta, list[RunVerdict]]]:
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
        if gpu is not None:
            gpus = [g for g in gpus if g.index == gpu]
            if not gpus:
                raise UserError(f"the history has no GPU {gpu}")
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
            limit = limit_w
            source: PowerLimitSource = "reported"
            if args.power_limit_w is not None:  # the user's figure replaces the stored one
                limit, source = args.power_limit_w, "given"
                columns.pop("power_limit_w", None)
            out.append((f"GPU {info.index} {info.name}", meta,
                        verdicts_for_log(rows.time_s, columns, sm_clock_max_mhz=info.sm_clock_max_mhz,
                                         power_limit_w=limit, power_limit_source=source,
                                         gpu_name=gpu_name or info.name, temp_slowdown_c=info.temp_slowdown_c)))
        if samples == 0:  # nothing to judge is not "held its speed": say so (exit 2)
            span = store.time_range()
            held = (f"it holds {iso_local(span[0])} .. {iso_local(span[1])}" if span is not None
                    else "it holds no samples yet")
            raise UserError(f"no samples in {path} between {iso_local(start)} and {iso_local(end)} ({held}); "
                            "choose the range with --from/--to")
        return out
    finally:
        store.close()
