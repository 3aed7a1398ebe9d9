"""The weekly report as HTML (for the browser and, through QTextDocument, for the PDF).

Everything that comes from the machine or the user (process and GPU names, recommendation
texts that quote them, notes) passes through ``e``, once (it returns ``Markup``, which it leaves
alone): ``printable`` (ESC, BEL, NUL, C1 controls and
lone surrogates shown as ``\\x1b``; ``invoice\u202egpj.exe`` must not read as ``invoiceexe.jpg``)
and ``html.escape`` (a process may be named ``<script>alert(1)</script>``). The markup stays within
what Qt's rich text understands (tables, inline styles, ``page-break-before``), so the PDF is
rendered from the same HTML.

Colours come from a ``ReportColours``: ``PAPER`` (dark text on white) for exported files, which
are printed and opened outside the app, and ``report_colours(theme)`` for the History page,
which follows the window's theme.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from advisor.costs import break_even_text, cost_answer
from advisor.profile import KIND_LABELS, KINDS
from advisor.safetext import printable
from advisor.wording import CODE_SPAN, parenthesized
from desktop.reporting import gpu_name, shared_slot_label

if TYPE_CHECKING:
    from desktop.reporting import ReportData
    from desktop.ui.theme import Theme


@dataclass(frozen=True)
class ReportColours:
    """The report's colours: text, muted text, page, table rules and header, the demo note, severities."""

    text: str
    muted: str
    page: str
    rule: str
    header: str
    demo_fill: str
    demo_border: str
    critical: str
    warning: str
    info: str

    def severity(self, severity: str) -> str:
        return {"critical": self.critical, "warning": self.warning, "info": self.info}.get(severity, self.muted)

    def css(self) -> str:
        return (f"body {{ font-family: 'DejaVu Sans', Arial, sans-serif; font-size: 10pt; color: {self.text};"
                f" background: {self.page}; }}\n"
                "h1 { font-size: 17pt; margin-bottom: 2px; } h2 { font-size: 13pt; margin-top: 16px; }\n"
                "table { border-collapse: collapse; margin: 4px 0 8px 0; }\n"
                f"th, td {{ border: 1px solid {self.rule}; padding: 3px 6px; text-align: left;"
                " vertical-align: top; }\n"
                f"th {{ background: {self.header}; }} td.num {{ text-align: right; }}\n"
                f".demo {{ background: {self.demo_fill}; border: 1px solid {self.demo_border}; padding: 6px; }}\n"
                f".muted {{ color: {self.muted}; }}\n")


#: Dark text on white: exported HTML and PDF (printed, mailed, opened in a browser of any theme).
PAPER = ReportColours(text="#222222", muted="#666666", page="#ffffff", rule="#bbbbbb", header="#eef1f5",
                      demo_fill="#fff3cd", demo_border="#d6b656", critical="#c0392b", warning="#d68910",
                      info="#2e86c1")


def report_colours(theme: Theme) -> ReportColours:
    """The report in the window's theme: ``PAPER`` when light, the theme's own colours when dark."""
    if not theme.dark:
        return PAPER
    return ReportColours(text=theme.text, muted=theme.muted, page=theme.base, rule=theme.border, header=theme.window,
                         demo_fill="#3b3320", demo_border=theme.warn, critical=theme.bad, warning=theme.warn,
                         info=theme.accent)


def code_spans(escaped: str) -> str:
    """Already escaped text with its `code` marks shown as code (the rule ids and backticks are for the CLI)."""
    return CODE_SPAN.sub(r"<code>\1</code>", str(escaped))  # str: re.sub on Markup escapes the <code> it adds


def e(value: object) -> Markup:
    """``value`` as HTML text: control characters, bidi controls and lone surrogates shown escaped
    (``printable``: an ESC or BEL in a process name must not reach a report or a terminal that cats it),
    then HTML-escaped. The one escaping point: what it returns is ``Markup``, which it hands back as it is,
    so text escaped by a caller and again by ``_table`` stays escaped once (``Bob&amp;#x27;s`` was)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(printable(value), quote=True))  # escaped on this very line


def num(value: float | None, digits: int = 1, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:,.{digits}f}{' ' + unit if unit else ''}"


def when(time_s: float, fmt: str = "%a %d %b %Y %H:%M") -> str:
    return datetime.fromtimestamp(time_s).strftime(fmt)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{c}</td>" if i >= numeric_from else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    # <thead>: Qt repeats the header row at the top of each page a table runs onto (QTextTableFormat.headerRowCount).
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _throttle_cell(cause: str) -> Callable[..., str]:
    """A cause's minutes; thermal names its HW thermal part as the advice does ("Of it at the HW thermal slowdown")."""
    def cell(g: Any) -> str:
        text = num(g.throttle_minutes.get(cause, 0.0), 0, "min")
        if cause == "thermal" and g.hw_thermal_minutes > 0:
            text += f" (of it HW thermal {num(g.hw_thermal_minutes, 1, 'min')})"
        return text
    return cell


def _gpu_section(data: ReportData) -> str:
    s = data.summary
    cur = e(s.currency)
    parts = ["<h2>GPUs</h2>"]
    headers = ["", *[data.labels.get(g.uuid, f"GPU {g.index} {parenthesized(g.name)}")
                     + (" (simulated)" if g.simulated and "simulated" not in g.name else "") for g in s.gpus]]
    rows: list[tuple[str, Callable[..., str]]] = [
        ("Busy", lambda g: num(g.busy_hours, 1, "h")),
        ("Mean utilization while busy", lambda g: num(g.mean_util_busy_pct, 0, "%")),
        ("Energy", lambda g: f"{num(g.energy_kwh, 2, 'kWh')} ({num(g.energy_cost, 2)} {cur})"),
        ("Peak / p95 temperature", lambda g: f"{num(g.peak_temp_c, 0)} / {num(g.p95_temp_c, 0, '°C')}"),
        ("Throttled (any cause)", lambda g: num(g.throttled_minutes, 0, "min")),
        *[(f"Throttled: {cause}", _throttle_cell(cause)) for cause in (s.gpus[0].throttle_minutes if s.gpus else {})],
        ("VRAM peak / total", lambda g: f"{num(g.vram_peak_mib, 0)} / {num(g.vram_total_mib, 0, 'MiB')}"),
        ("Time with VRAM above 90 %", lambda g: num(g.vram_above_90_minutes, 0, "min")),
        ("Workload", lambda g: "<br>".join(
            f"{e(KIND_LABELS[k])}: {g.profile.shares[k] * 100:.0f} %" for k in KINDS if g.profile.shares[k] > 0)
         or "idle"),
    ]
    table_rows = [[e(label), *[fn(g) for g in s.gpus]] for label, fn in rows]
    parts.append(_table([e(h) for h in headers], table_rows))
    for g in s.gpus:
        reasons = "; ".join(f"{e(KIND_LABELS[k])}: {e(g.profile.reasons[k])}" for k in (*KINDS, "idle")
                            if k in g.profile.reasons)
        parts.append(f"<p class=\"muted\">{e(data.labels.get(g.uuid, f'GPU {g.index}'))}: {reasons}</p>")
    return "".join(parts)


def _changes(data: ReportData) -> str:
    s = data.summary
    if not s.has_previous:
        return "<h2>Against the previous week</h2><p class=\"muted\">No history for the previous week.</p>"
    # A percentage changes by percentage points (Change.delta_text): "+5.2 pp", never "+5.2 %".
    rows = [[f"{e(gpu_name(data, c.gpu_index, c.gpu_key))}: {e(c.label)}", num(c.before, 1, e(c.unit)),
             num(c.after, 1, e(c.unit)), e(c.delta_text())] for c in s.changes]
    note = f"<p class=\"muted\">{e(s.changes_note)}</p>" if s.changes_note else ""
    return "<h2>Against the previous week</h2>" + note + _table(["", "previous", "this week", "change"], rows)


def _recommendations(data: ReportData, colours: ReportColours) -> str:
    recs = data.summary.recommendations
    if not recs:
        return "<h2>Top recommendations</h2><p>No recommendations: nothing crossed a threshold this week.</p>"
    parts = ["<h2>Top recommendations</h2>"]
    for rec in recs:
        colour = colours.severity(rec.severity)
        evidence = "".join(f"<li>{e(item.text())}</li>" for item in rec.evidence)
        spans = ", ".join(f"{e(when(a, '%a %H:%M'))} - {e(when(b, '%a %H:%M'))}" for a, b in rec.time_ranges[:3])
        parts.append(
            f"<p><b style=\"color:{colour}\">[{e(rec.severity.upper())}]</b> <b>{e(rec.title)}</b>"
            + (f" <span class=\"muted\">({e(which)})</span>" if (which := shared_slot_label(data, rec)) else "")
            + "</p>"
            f"<ul>{evidence}</ul>"
            f"<p><b>Action:</b> {code_spans(e(rec.action))}</p>"
            + (f"<p class=\"muted\">When: {spans}</p>" if spans else ""))
    return "".join(parts)


def _processes(data: ReportData) -> str:
    procs = data.summary.top_processes
    if not procs:
        return ""
    rows = [[e(p.name), e(gpu_name(data, p.gpu_index, p.gpu_key).removeprefix("GPU ")), num(p.gpu_hours, 1, "h"),
             num(p.present_hours, 1, "h"), num(p.peak_vram_mib, 0, "MiB")] for p in procs]
    return "<h2>Top processes</h2>" + _table(
        ["process", "GPU", "GPU-hours (while busy)", "holding memory", "peak VRAM"], rows, numeric_from=1)


def _who(data: ReportData) -> str:
    """"Who used the GPU": GPU time, energy and its cost per user, per command and per container."""
    if not data.who:
        return ""
    from advisor.usage import fmt_cost, fmt_energy, fmt_gpu_hours

    parts = ["<h2><a name=\"who\"></a>Who used the GPU</h2>"]
    for table in data.who:
        rows = [[e(line.key), e(fmt_gpu_hours(line.gpu_hours)), e(fmt_energy(line.energy_wh)),
                 num(line.energy_share_pct, 0, "%"), e(fmt_cost(line.cost, table.currency)), str(line.processes)]
                for line in table.lines]
        if table.unattributed_wh > 0:
            rows.append(["<i>no process on the GPU</i>", "", e(fmt_energy(table.unattributed_wh)), "",
                         e(fmt_cost(table.unattributed_wh / 1000.0 * table.price_per_kwh, table.currency)), ""])
        parts.append(f"<p><b>By {e(table.by)}</b></p>"
                     + _table([table.by, "GPU time", "energy", "share", "energy cost", "processes"], rows))
    parts.append(f"<p class=\"muted\">{e(data.who[0].basis_text())} GPU time is the time a {e(data.who[0].by)} "
                 "held memory on a GPU; two sharing one GPU each count the hour.</p>")
    parts.extend(f"<p class=\"muted\">{e(note)}</p>" for note in data.who_notes)
    return "".join(parts)


def _costs(data: ReportData) -> str:
    parts = ["<h2>Own vs rent</h2>"]
    cur = e(data.advice.currency)
    for cost in data.advice.costs:
        # The Costs page's sentence and break-even texts (advisor.costs): the same figure on every page.
        parts.append(f"<p><b>{e(cost.gpu_name)}</b>: {e(cost_answer(cost))}</p>")
        owned = (f"owned {num(cost.owned_month, 2)} {cur}/month (amortisation {num(cost.owned_fixed_month, 2)} + "
                 f"electricity {num(cost.owned_energy_month, 2)})" if cost.priced else
                 f"owned {num(cost.owned_energy_month, 2)} {cur}/month in electricity (no purchase price set)")
        parts.append(f"<p>{num(cost.busy_hours_month, 0)} busy h/month; {owned}.</p>")
        rows = [[e(f"{o.offer.gpu_model} ({o.offer.vram_gb:.0f} GB), {o.offer.provider}"),
                 num(o.relative_speed, 2, "x"), num(o.cloud_hours_month, 1, "h"),
                 num(o.on_demand_month, 2, "USD"), num(o.spot_month, 2, "USD") if o.spot_month is not None else "-",
                 e(break_even_text(cost, o)),
                 e(f"{o.offer.source}, {o.offer.date}")] for o in cost.options[:6]]
        if rows:
            parts.append(_table(["cloud GPU", "speed", "hours/month", "on demand", "spot", "break-even (busy h/month)",
                                 "price source"], rows))
        if cost.bigger_option is not None:
            b = cost.bigger_option
            parts.append(f"<p>For jobs this GPU cannot hold: {e(b.gpu_model)} ({b.vram_gb:.0f} GB) at "
                         f"{e(b.provider)}, {b.on_demand_usd_h:.2f} USD/h on demand.</p>")
        parts.extend(f"<p class=\"muted\">{e(n)}</p>" for n in cost.notes)
    return "".join(parts)


def _charts(data: ReportData, image_src: Callable[[str], str]) -> str:
    # No forced page break before the charts (it left the page before them nearly empty): the PDF keeps
    # each caption with its chart instead (``reports.report_document``).
    parts = ["<h2>Charts</h2>"]
    for key, caption in data.chart_captions.items():
        parts.append(f"<p><b>{e(caption)}</b><br><img src=\"{image_src(key)}\" width=\"640\"></p>")
    return "".join(parts)


def render_html(data: ReportData, image_src: Callable[[str], str], colours: ReportColours = PAPER) -> str:
    """The report; ``image_src(key)`` gives each chart's ``src`` (a data URI, or a PDF resource name)."""
    s = data.summary
    title = f"Rigscope weekly report, {e(data.week_label)}"
    span = f"{e(when(s.start_s, '%a %d %b %Y'))} - {e(when(s.end_s - 1, '%a %d %b %Y'))} ({e(s.timezone_name)})"
    notes = "".join(f"<p class=\"demo\">{e(n)}</p>" if "Demo" in n else f"<p class=\"muted\">{e(n)}</p>"
                    for n in (*s.notes, *data.notes))
    body = (f"<h1>{title}</h1><p class=\"muted\">{span}; generated {e(when(data.generated_s))}</p>{notes}"
            + _gpu_section(data) + _recommendations(data, colours) + _changes(data) + _processes(data) + _who(data)
            + _costs(data)
            + _charts(data, image_src))
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{colours.css()}</style></head><body>{body}</body></html>")
