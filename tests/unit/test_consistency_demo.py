"""The demo week, rendered as data from every page and report that shows it, checked against itself and its raw samples.

Issue 24: the figures contradicted each other from page to page. The demo week is stored by the
real `rigscope demo` code (``tests.unit.advisor.demo_db``); its figures are read back as data from:

- "Costs page": the table and the answer of ``CostsPage`` (the window's page, offscreen);
- "History page" / "weekly report": ``build_report`` of the week, its JSON and its HTML;
- "Advisor": ``compute_advice`` of the last 7 days (the Advisor page's advice) and `rigscope advise`;
- "Dashboard 7 d lane": what the history fill paints in the throttle lane (each cause's share per bucket);
- "raw samples": the stored samples themselves.

and checked: longest stretch <= busy time <= span, lane share = the raw share within one bucket,
break-even equal everywhere, process VRAM <= total, "at its power limit" only where the power is
>= 95 % of the limit. ``check`` names the page and the two figures of each failure; the last test
perturbs one figure at a time and sees the check fail.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import time
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import numpy as np
import pytest

from advisor.costs import break_even_text
from advisor.wording import duration_text
from desktop import cli, config
from desktop.advice import compute_advice, load_recent_frame
from desktop.history.store import HistoryStore
from desktop.report_output import to_json
from desktop.report_week import load_week
from desktop.reporting import build_report
from desktop.ui.pages.dashboard_panel import LANE_REASONS, LANE_SHARE_COLUMNS, lane_bucket_widths, lane_shares
from tests.unit.advisor.demo_db import DEMO_WEEK_END_S, stored_demo_week

NOW_S = DEMO_WEEK_END_S + 3600.0
PRICE = 3200.0
#: "at its power limit": the power meanwhile is at least this share of the limit.
AT_LIMIT_SHARE = 0.95


@dataclass
class Figures:
    """Every figure, by (page, name); ``lanes`` and ``raw_lanes``: per cause, the share per bucket."""

    values: dict[tuple[str, str], Any] = field(default_factory=dict)

    def put(self, page: str, name: str, value: Any) -> None:
        self.values[(page, name)] = value

    def get(self, page: str, name: str) -> Any:
        return self.values[(page, name)]


def _settings() -> config.Settings:
    return dataclasses.replace(config.Settings(), costs=dataclasses.replace(config.Settings().costs,
                                                                            purchase_price=PRICE))


def _costs_page_rows(advice: Any, settings: config.Settings) -> tuple[dict[str, str], str]:
    from desktop.ui.pages.costs_page import CostsPage

    page = CostsPage(lambda: advice, settings.costs)
    page.set_advice(advice)
    column = CostsPage.HEADERS.index("break-even (busy h/month)")
    month = next(i for i, h in enumerate(CostsPage.HEADERS) if h.startswith("on demand"))
    rows = {f"{page.table.item(r, 0).text()} at {page.table.item(r, 1).text()}": page.table.item(r, column).text()
            for r in range(page.table.rowCount())}
    rows.update({f"USD/month {page.table.item(r, 0).text()} at {page.table.item(r, 1).text()}":
                 page.table.item(r, month).text() for r in range(page.table.rowCount())})
    answer = page.answer.text()
    page.deleteLater()
    return rows, answer


def _lane_figures(store: HistoryStore, uuid: str, start_s: float, end_s: float, figures: Figures) -> None:
    """The 7 d lane as the history fill reads it, and the raw samples' share within each of a few buckets."""
    result = store.query(uuid, list(LANE_SHARE_COLUMNS), start_s, end_s, max_points=2000)
    columns = {k: np.asarray(v, dtype=np.float64) for k, v in result.columns.items()}
    times = np.asarray(result.time_s, dtype=np.float64)
    widths = lane_bucket_widths(times)
    shares = dict(zip(LANE_REASONS, lane_shares(columns), strict=True))
    raw = store.query(uuid, ["clock_event_reasons", "duration_s"], start_s, end_s, max_points=0, resolution="raw")
    raw_t = np.asarray(raw.time_s)
    mask = np.nan_to_num(np.asarray(raw.columns["clock_event_reasons"])).astype(np.int64)
    raw_d = np.asarray(raw.columns["duration_s"])
    for reason, share in shares.items():
        if share is None:
            continue
        held = np.flatnonzero(np.isfinite(share))
        for i in held[:: max(1, held.size // 40)]:
            inside = (raw_t >= times[i]) & (raw_t < times[i] + widths[i])
            if not inside.any():
                continue
            raw_share = float(raw_d[inside & ((mask & int(reason)) != 0)].sum() / raw_d[inside].sum())
            figures.put("Dashboard 7 d lane", f"{reason.label} share at {times[i]:.0f}", float(share[i]))
            figures.put("raw samples", f"{reason.label} share at {times[i]:.0f}", raw_share)


def _report_costs(report: dict[str, Any], figures: Figures) -> None:
    """The monthly costs and the recorded span as the report's JSON writes them."""
    for cost in report["advice"]["costs"]:  # the report's JSON, as written
        for option in cost["options"]:
            name = f"{option['offer']['gpu_model']} at {option['offer']['provider']}"
            figures.put("weekly report JSON", f"USD/month {name}", f"{option['on_demand_month']:,.2f}")
        figures.put("weekly report JSON", "recorded span", cost["history_text"])


def collect(store: HistoryStore, qapp: Any, week: str = "2026-W47") -> Figures:
    settings = _settings()
    figures = Figures()
    label, frame, previous, notes = load_week(store, week, UTC, NOW_S)
    data = build_report(frame, previous, settings, UTC, label, now_s=NOW_S, notes=notes)
    report = json.loads(to_json(data))
    from desktop.ui.report.report_html import render_html

    html = render_html(data, lambda key: key)
    # The same window on every page (issue 32): the week's advice, as the Costs page would show it for it.
    advisor = compute_advice(frame, settings)
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["advise", "--db", str(store.path), "--week", week], now_s=NOW_S) == 0
    advise_text = out.getvalue()
    for gw in data.summary.gpus:
        g = f"GPU {gw.index}"
        figures.put("weekly report", f"{g} busy h", gw.busy_hours)
        figures.put("weekly report", f"{g} recorded h", gw.recorded_s / 3600.0)
        figures.put("weekly report", f"{g} span h", (data.summary.end_s - data.summary.start_s) / 3600.0)
        figures.put("weekly report JSON", f"{g} busy h", next(
            x["busy_hours"] for x in report["summary"]["gpus"] if x["index"] == gw.index))
        for kind, share in gw.profile.shares.items():
            jobs = [j for j in gw.profile.jobs if j.kind == kind]
            if jobs:
                figures.put("weekly report", f"{g} {kind} busy h", share * gw.profile.busy_s / 3600.0)
                figures.put("weekly report", f"{g} {kind} longest h", max(j.busy_s for j in jobs) / 3600.0)
                longest = re.search(r"longest: (?:a )?([0-9.]+) (h|min)", gw.profile.reasons[kind])
                if longest:
                    hours = float(longest.group(1)) / (60.0 if longest.group(2) == "min" else 1.0)
                    figures.put("weekly report text", f"{g} {kind} longest h", hours)
    for cost in data.advice.costs:
        for option in cost.options:
            name = f"{option.offer.gpu_model} at {option.offer.provider}"
            figures.put("History page", f"break-even {name}", break_even_text(cost, option))
    _report_costs(report, figures)
    rows, answer = _costs_page_rows(advisor, settings)
    for name, text in rows.items():
        figures.put("Costs page", name if name.startswith("USD/month") else f"break-even {name}", text)
    figures.put("Costs page", "answer", answer)
    for cost in advisor.costs:
        for option in cost.options[:3]:
            name = f"{option.offer.gpu_model} at {option.offer.provider}"
            shown = re.search(re.escape(f"  {name}:") + r".*break-even \(busy h/month\): (.+)$", advise_text, re.M)
            figures.put("rigscope advise", f"break-even {name}", shown.group(1) if shown else None)
            money = re.search(re.escape(f"  {name}:") + r".*, ([0-9,.]+) USD/month on demand", advise_text, re.M)
            figures.put("rigscope advise", f"USD/month {name}", money.group(1) if money else None)
        figures.put("rigscope advise", "answer", next(
            (line.split(": ", 1)[1] for line in advise_text.splitlines() if line.startswith("Costs, ")), None))
    figures.put("weekly report HTML", "has answer", all(
        html.replace("&#x27;", "'").count(line) for line in ([answer] if answer else [])))
    # Process VRAM: the sum over a GPU's processes at one instant, against the card's total.
    procs = frame.processes
    assert procs is not None
    for g in frame.gpus:
        mine = procs.gpu_index == g.meta.index
        keys, inverse = np.unique(procs.time_s[mine], return_inverse=True)
        summed = np.bincount(inverse, weights=np.nan_to_num(procs.vram_mib[mine]))
        figures.put("Processes page", f"GPU {g.meta.index} VRAM used max MiB", float(summed.max()) if keys.size else 0)
        figures.put("Processes page", f"GPU {g.meta.index} VRAM total MiB", g.meta.vram_total_mib)
    # "at its power limit": the advice's power-cap cards against their own power and limit.
    for rec in advisor.recommendations:
        if "at its power limit" in rec.title:
            figures.put("Advisor", f"{rec.title} mean power W", rec.evidence_value("Mean power while capped"))
            figures.put("Advisor", f"{rec.title} limit W", rec.evidence_value("Power limit"))
    gpu = frame.gpus[0]
    _lane_figures(store, gpu.meta.uuid, NOW_S - 7 * 86400.0, NOW_S, figures)
    return figures


def check(f: Figures) -> list[str]:
    """Every equality and bound that must hold; each failure names the pages and the two figures."""
    problems: list[str] = []
    v = f.values

    def bound(a: tuple[str, str], b: tuple[str, str], tolerance: float = 1e-6) -> None:
        if v[a] > v[b] + tolerance:
            problems.append(f"{a[0]} {a[1]} = {v[a]:.4g} exceeds {b[0]} {b[1]} = {v[b]:.4g}")

    def equal(a: tuple[str, str], b: tuple[str, str], tolerance: float | None = None) -> None:
        same = v[a] == v[b] if tolerance is None else abs(v[a] - v[b]) <= tolerance
        if not same:
            problems.append(f"{a[0]} {a[1]} = {v[a]!r} differs from {b[0]} {b[1]} = {v[b]!r}")

    for (page, name) in list(v):
        if page == "weekly report" and re.fullmatch(r"GPU \d+ busy h", name):
            g = name.removesuffix(" busy h")
            bound((page, name), (page, f"{g} recorded h"))
            bound((page, f"{g} recorded h"), (page, f"{g} span h"))
            equal((page, name), ("weekly report JSON", name), 1e-9)
        if page == "weekly report" and name.endswith(" longest h"):
            kind_busy = name.replace(" longest h", " busy h")
            bound((page, name), (page, kind_busy))
            if ("weekly report text", name) in v:  # as written ("16.8 h", "3 min"): to its rounding
                bound(("weekly report text", name), (page, kind_busy), 0.051)
        if page == "Costs page" and name.startswith(("USD/month", "break-even")):
            equal((page, name), ("weekly report JSON" if name.startswith("USD") else "History page", name))
            if ("rigscope advise", name) in v:
                equal((page, name), ("rigscope advise", name))
        if page == "Processes page" and name.endswith("VRAM used max MiB"):
            bound((page, name), (page, name.replace("used max", "total")))
        if page == "Advisor" and name.endswith("mean power W"):
            limit = v[(page, name.replace("mean power W", "limit W"))]
            if v[(page, name)] < AT_LIMIT_SHARE * limit:
                problems.append(f"{page} says '{name.removesuffix(' mean power W')}' with "
                                f"{v[(page, name)]:.0f} W of {limit:.0f} W (under {AT_LIMIT_SHARE:.0%})")
        if page == "Dashboard 7 d lane":
            # Within one bucket's resolution: the bucket is the raw rows it holds, so the shares agree.
            equal((page, name), ("raw samples", name), 0.02)
    equal(("Costs page", "answer"), ("rigscope advise", "answer"))
    if not v[("weekly report HTML", "has answer")]:
        problems.append("weekly report HTML lacks the Costs page's answer")
    return problems


#: The demo's full week, and the week before, of which the demo holds one day (a partial week).
WEEKS = ("2026-W47", "2026-W46")


@pytest.fixture(scope="module", params=WEEKS)
def figures(request: pytest.FixtureRequest, qapp: Any, tmp_path_factory: pytest.TempPathFactory) -> Figures:
    with pytest.MonkeyPatch.context() as env:
        # `rigscope advise` reads the settings file: the same purchase price as the pages.
        env.setenv("RIGSCOPE_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
        env.setenv("TZ", "UTC")  # `advise --week` reads the week in local time, as `report` does
        time.tzset()
        config.save(_settings())
        try:
            with HistoryStore.open(stored_demo_week(), readonly=True) as store:
                return collect(store, qapp, request.param)
        finally:
            env.undo()
            time.tzset()


def test_the_demo_week_agrees_with_itself_on_every_page(figures: Figures) -> None:
    assert any(page == "Dashboard 7 d lane" for page, _ in figures.values), "no lane figures collected"
    assert any(page == "Costs page" and n.startswith("break-even") for page, n in figures.values)
    assert any(n.endswith("longest h") for _, n in figures.values)
    problems = check(figures)
    assert not problems, "\n".join(problems)


def test_a_partial_week_is_extrapolated_from_its_recorded_days_and_says_so(figures: Figures) -> None:
    """Issue 32: a week with one recorded day was extrapolated as "7 days of history" (its busy hours and
    costs a seventh of what the recorded day says), and the Costs page gave another figure for it."""
    recorded_h = figures.get("weekly report", "GPU 0 recorded h")
    week_h = figures.get("weekly report", "GPU 0 span h")
    said = figures.get("weekly report JSON", "recorded span")
    answer = figures.get("Costs page", "answer")
    assert "days of history" not in answer and "days of history" not in figures.get("rigscope advise", "answer")
    week = said.rsplit(" of ", 1)[1]
    assert week in WEEKS and f"from {said}" in answer
    if recorded_h < 0.95 * week_h:  # the partial week: its day, not 7, is what a month is extrapolated from
        assert said == duration_text(recorded_h * 3600.0).replace(" ", " recorded ", 1) + f" of {week}"
        busy_h = figures.get("weekly report", "GPU 0 busy h")
        month = re.search(r"for your ([0-9,]+) busy hours a month", answer)
        assert month is not None
        assert float(month.group(1).replace(",", "")) == pytest.approx(busy_h * 30 * 24 / recorded_h, abs=0.5)


def test_the_last_7_days_name_their_window() -> None:
    """The Advisor and Costs pages' default window says which it is, beside a report's "of 2026-W47"."""
    with HistoryStore.open(stored_demo_week(), readonly=True) as store:
        advice = compute_advice(load_recent_frame(store, 7.0, NOW_S), _settings())
    assert [c.history_text for c in advice.costs] == ["7 recorded days of the last 7 days"]


PERTURBATIONS: dict[str, Callable[[Figures], str]] = {}


def _perturb(page: str, prefix: str, change: Callable[[Any], Any]) -> Callable[[Figures], str]:
    def apply(f: Figures) -> str:
        key = next(k for k in f.values if k[0] == page and k[1].startswith(prefix))
        f.values[key] = change(f.values[key])
        return f"{key[0]} {key[1]}"
    return apply


PERTURBATIONS = {
    "longest burst": _perturb("weekly report", "GPU 0 bursts longest h", lambda x: x * 10 + 1),
    "busy time": _perturb("weekly report", "GPU 0 busy h", lambda x: x + 500),
    "report JSON busy": _perturb("weekly report JSON", "GPU 0 busy h", lambda x: x * 1.1),
    "break-even": _perturb("History page", "break-even", lambda _x: "0 h"),
    "costs answer": _perturb("Costs page", "answer", lambda x: x + " "),
    "monthly cost": _perturb("Costs page", "USD/month", lambda x: x + "1"),
    "process VRAM": _perturb("Processes page", "GPU 0 VRAM used max", lambda x: x + 20_000),
    "lane share": _perturb("Dashboard 7 d lane", "", lambda x: min(1.0, x + 0.3) if x < 0.7 else x - 0.3),
    "power at its limit": _perturb("Advisor", "", lambda x: x * 0.6 if isinstance(x, float) else x),
}


@pytest.mark.parametrize("what", sorted(PERTURBATIONS))
def test_one_perturbed_figure_fails_naming_its_page(figures: Figures, what: str) -> None:
    perturbed = Figures(dict(figures.values))
    if what == "power at its limit" and not any(p == "Advisor" for p, _ in perturbed.values):
        pytest.skip("the demo week has no 'at its power limit' card")
    changed = PERTURBATIONS[what](perturbed)
    problems = check(perturbed)
    assert problems, f"perturbing {changed} went unnoticed"
    assert any(changed.split(" ")[0] in p for p in problems), problems
