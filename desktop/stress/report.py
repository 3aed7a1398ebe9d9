"""A finished stress run as a stand-alone JSON or HTML report (pure: the caller supplies any chart image)."""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Iterable

from advisor.verdict import Verdict
from desktop.stress.records import extra_json, gpu_identity
from desktop.stress.run_model import RunResult

#: The per-sample series a report carries besides throughput.
REPORT_SERIES = ("sm_clock_mhz", "temperature_c", "power_w", "clock_event_reasons")


def _nan_free(values: Iterable[float]) -> list[float | None]:
    return [None if not math.isfinite(float(v)) else float(v) for v in values]


def run_json(result: RunResult, verdict: Verdict, run_id: int | None = None) -> str:
    """The verdict, the run's settings and every point (NaN as null)."""
    data = json.loads(extra_json(result, verdict))
    data.update({"run_id": run_id, "workload": result.config.workload, "device": result.config.device,
                 "started_s": result.started_s, "ended_s": result.ended_s,
                 "points": {"time_s": result.time_s.tolist(), "throughput": _nan_free(result.throughput),
                            **{k: _nan_free(result.columns[k]) for k in REPORT_SERIES if k in result.columns}}})
    return json.dumps(data, indent=2, default=str)


def run_html(result: RunResult, verdict: Verdict, chart_png: bytes | None = None) -> str:
    """One self-contained page: the verdict sentence, the comparison, the figures and the charts."""
    _uuid, name, _driver = gpu_identity(result)
    v = verdict
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(val))}</td></tr>" for k, val in (
        ("GPU", name), ("Workload", f"{result.config.workload} {result.dtype}"),
        ("Device", result.config.device), ("Peak", f"{v.peak:.4g} {v.unit}"),
        ("Sustained", f"{v.sustained:.4g} {v.unit}"), ("Result checks / errors", f"{v.checks} / {v.errors}")))
    image = ""
    if chart_png:
        encoded = base64.b64encode(chart_png).decode("ascii")
        image = f"<img alt='throughput, clock, temperature and power' src='data:image/png;base64,{encoded}'>"
    return (f"<!doctype html><meta charset='utf-8'><title>Rigscope stress test</title>"
            f"<h1>Rigscope stress test</h1><p><b>{html.escape(v.sentence)}</b></p>"
            f"<p>{html.escape(v.comparison)}</p><table>{rows}</table>{image}")
