"""Issue 37 item 6: "Vast.ai (market))" on the Costs page. A provider with an aside of its own ("Vast.ai (market)")
put in parentheses read "(Vast.ai (market))"; it reads "(Vast.ai, market)" on the Costs page and the Jobs card."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.wording import parenthesized
from desktop import config
from desktop.advice import compute_advice
from desktop.config import CostSettings
from desktop.ui.pages.costs_page import CostsPage
from tests.unit.advisor.demo_frame import demo_week_frame


def test_parenthesized_never_nests() -> None:
    assert parenthesized("Vast.ai (market)") == "(Vast.ai, market)"
    assert parenthesized("RunPod") == "(RunPod)"
    assert parenthesized("AWS g6.xlarge") == "(AWS g6.xlarge)"
    assert parenthesized("odd (a) b") == "(odd (a) b)"  # an aside inside the name stays, one pair around it


@pytest.mark.parametrize("price", [0.0, 3200.0])
def test_the_costs_pages_answer_names_the_market_offer_without_doubled_parentheses(qtbot, price: float) -> None:
    settings = dataclasses.replace(config.Settings(), costs=CostSettings(purchase_price=price))
    advice = compute_advice(demo_week_frame(), settings)
    page = CostsPage(lambda: advice, settings.costs)
    qtbot.addWidget(page)
    page.set_advice(advice)
    answer = page.answer.text()
    assert "Vast.ai" in answer  # the demo's cheapest RTX 4090 is the market offer
    assert "(Vast.ai, market)" in answer and "))" not in answer
    assert answer.count("(") == answer.count(")")


def test_an_alert_names_the_simulated_gpu_without_doubled_parentheses(make_app) -> None:
    from desktop.config import AlertSettings, Settings

    h = make_app(settings=Settings(alerts=AlertSettings(vram_pct=50.0, debounce_s=0.0)))
    h.backend.manual.set(0, 0.5, 12000.0)  # 12 GB of 16 GB: over 50 %
    h.tick(3)
    message = next(a.message for a in h.app.fired if a.kind == "vram")
    assert message.startswith("GPU 0 (NVIDIA GeForce RTX 4090 Laptop GPU, simulated) VRAM is"), message
    assert "))" not in message and "))" not in h.app.window.alert_button.summary


def test_the_reports_gpu_header_names_the_simulated_gpu_without_doubled_parentheses() -> None:
    # The History page's report table header read "GPU 0 (NVIDIA GeForce RTX 4090 Laptop GPU (simulated))".
    from desktop.reporting import gpu_labels

    labels = gpu_labels([(0, "GPU-a", "NVIDIA GeForce RTX 4090 Laptop GPU (simulated)"), (1, "GPU-b", "NVIDIA H100")])
    assert labels == {"GPU-a": "GPU 0 (NVIDIA GeForce RTX 4090 Laptop GPU, simulated)", "GPU-b": "GPU 1 (NVIDIA H100)"}
