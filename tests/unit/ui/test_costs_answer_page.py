"""The Costs page answers at the top, and the Costs and History pages show the same break-even (issue 24).

Before: no one-line answer; break-even "-" on Costs but "0 h" on History with no price; the
price field read "0" as if 0 were a price; "extrapolate that to a month" above "0 busy
h/month"; History kept "No purchase price set" after a price was typed until another week was
picked; "Run a stress test" stayed after one ran (the page never read the history again).
"""

from __future__ import annotations

import dataclasses
import re
from zoneinfo import ZoneInfo

import pytest

from advisor.costs import break_even_text, cost_answer
from advisor.frame import StressResult
from desktop import config
from desktop.advice import Advice, compute_advice
from desktop.config import CostSettings
from desktop.reporting import build_report
from desktop.ui.pages.advisor_history import HistoryPage
from desktop.ui.pages.costs_page import NO_PRICE_FIELD, CostsPage
from tests.unit.advisor.demo_frame import demo_week_frame

UTC = ZoneInfo("UTC")


@pytest.fixture(scope="module")
def frame():
    return demo_week_frame()


def _costs_page(qtbot, advice: Advice, costs: CostSettings) -> CostsPage:
    page = CostsPage(lambda: advice, costs)
    qtbot.addWidget(page)
    page.set_advice(advice)
    return page


def _break_even_column(page: CostsPage) -> list[tuple[str, str, str]]:
    column = CostsPage.HEADERS.index("break-even (busy h/month)")
    return [(page.table.item(r, 0).text(), page.table.item(r, 1).text(), page.table.item(r, column).text())
            for r in range(page.table.rowCount())]


@pytest.mark.parametrize("price", [0.0, 3200.0])
def test_costs_and_history_show_one_answer_and_one_break_even(qtbot, frame, price: float) -> None:
    settings = dataclasses.replace(config.Settings(), costs=CostSettings(purchase_price=price))
    advice = compute_advice(frame, settings)
    page = _costs_page(qtbot, advice, settings.costs)
    report = build_report(frame, None, settings, UTC, "2026-W47", now_s=frame.end_s)
    from desktop.ui.report.report_html import render_html

    html = render_html(report, lambda key: key)
    comparison = report.advice.costs[0]
    assert page.answer.text() == cost_answer(comparison, "above")  # where the price field is
    assert cost_answer(comparison) in html.replace("&#x27;", "'")
    shown = _break_even_column(page)
    assert shown
    costs_html = html[html.index("<h2>Own vs rent</h2>"):]
    compared = 0
    for model, provider, text in shown:
        option = next(o for o in comparison.options if (o.offer.gpu_model, o.offer.provider) == (model, provider))
        assert text == break_even_text(comparison, option)
        # The History page's row for that offer carries the same text (not "0 h" beside "-").
        row = re.search(f"<td>{re.escape(model)} \\(\\d+ GB\\), {re.escape(provider)}</td>.*?</tr>", costs_html)
        if row is not None:
            compared += 1
            assert f">{text}</td>" in row.group(0), (model, provider, text, row.group(0))
    assert compared >= 3
    if price == 0:
        assert page.price.text() == NO_PRICE_FIELD
        assert "Enter the purchase price above" in page.answer.text()
        assert {text for _, _, text in shown} == {"set a price"}
    else:
        assert "owning is cheaper after" in page.answer.text() or "renting stays cheaper" in page.answer.text()
    assert "from 7 recorded days of the last 7 days" in page.answer.text()


def test_no_busy_hours_is_not_extrapolated(qtbot, frame) -> None:
    settings = config.Settings()
    idle = dataclasses.replace(frame, gpus=tuple(
        dataclasses.replace(g, utilization_gpu_pct=g.utilization_gpu_pct * 0.0) for g in frame.gpus))
    advice = compute_advice(idle, settings)
    page = _costs_page(qtbot, advice, CostSettings(purchase_price=3000.0))
    assert "0 busy hours/month" in page.summary.text()
    assert "extrapolate" not in page.summary.text()
    assert page.answer.text().startswith("No busy hours in 7 recorded days of the last 7 days")


def test_history_reads_the_week_again_when_a_price_is_typed(qtbot, frame) -> None:
    settings = {"now": config.Settings()}
    page = HistoryPage(lambda: ["2026-W47"],
                       lambda label: build_report(frame, None, settings["now"], UTC, label, now_s=frame.end_s))
    qtbot.addWidget(page)
    page.show()
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading and page.data is not None, timeout=30_000)
    assert "Enter the purchase price on the Costs page" in page.view.toPlainText()
    settings["now"] = dataclasses.replace(settings["now"], costs=CostSettings(purchase_price=3200.0))
    page.inputs_changed()  # what the app calls when the Costs page saves a typed price
    qtbot.waitUntil(lambda: not page.loading and not page.stale, timeout=30_000)
    text = page.view.toPlainText()
    assert "Enter the purchase price" not in text and "in depreciation" in text


def test_a_stress_run_since_is_read_on_the_next_visit(qtbot, frame) -> None:
    gpu = frame.gpus[0].meta
    run = StressResult(1, frame.end_s - 900, frame.end_s - 300, gpu.uuid, gpu.name, "gemm", "bf16", "TFLOP/s",
                       61.0, 58.0, False, 0, None, "", device="cuda:0")
    frames = [frame, dataclasses.replace(frame, stress_results=(run,))]
    page = CostsPage(lambda: compute_advice(frames[0], config.Settings()), CostSettings(purchase_price=3000.0))
    qtbot.addWidget(page)
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading and page.advice is not None, timeout=30_000)
    assert "run a stress test" in page.notes.text()
    frames.pop(0)  # a stress run finished meanwhile
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading, timeout=30_000)
    assert "run a stress test" not in page.notes.text()
    assert "from your stress test (58 TFLOP/s sustained)" in page.notes.text()
