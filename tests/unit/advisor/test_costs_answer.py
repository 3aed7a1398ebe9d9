"""Costs that answer: one sentence, one break-even text for every page, the days the figures extrapolate from.

Reproduces issue 24: break-even "-" on the Costs page but "0 h" on the History page (no price
set: 0 / margin = 0 h); no one-line answer to "owning or renting: which is cheaper for me?".
"""

from __future__ import annotations

import dataclasses

from advisor.costs import Usage, break_even_text, compare, cost_answer
from tests.unit.advisor.test_costs import INPUTS, LAPTOP, RUNPOD_4090, SPECS, USAGE


def test_no_purchase_price_gives_no_break_even_but_one_text_saying_why() -> None:
    c = compare(LAPTOP, 16376.0, USAGE, dataclasses.replace(INPUTS, purchase_price=0.0), offers=[RUNPOD_4090],
                specs=SPECS)
    (opt,) = c.options
    assert not c.priced
    assert opt.break_even_busy_hours_month is None  # was 0.0: "0 h" on the History page
    assert break_even_text(c, opt) == "set a price"
    priced = compare(LAPTOP, 16376.0, USAGE, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    assert break_even_text(priced, priced.options[0]) == "293 h"


def test_the_answer_names_rent_power_depreciation_and_when_owning_pays_off() -> None:
    c = compare(LAPTOP, 16376.0, USAGE, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    # 49.35 cloud h x 0.69 = 34.05 $/month; power 3.60; depreciation 83.33; payback 3000 / 30.45 = 98.5 months
    assert cost_answer(c) == ("Renting an RTX 4090 at 0.69 USD/h (RunPod) would cost 34.05 USD a month for your "
                              "107 busy hours a month (from 7 recorded days, extrapolated to 30 days); owning costs "
                              "3.60 USD in power and 83.33 USD in depreciation a month: owning is cheaper after 99 "
                              "months.")


def test_without_a_price_the_answer_asks_for_one() -> None:
    c = compare(LAPTOP, 16376.0, USAGE, dataclasses.replace(INPUTS, purchase_price=0.0), offers=[RUNPOD_4090],
                specs=SPECS)
    answer = cost_answer(c, "above")
    assert answer.startswith("Renting an RTX 4090 at 0.69 USD/h (RunPod) would cost 34.05 USD a month")
    assert answer.endswith("owning costs 3.60 USD a month in power. Enter the purchase price above to see "
                           "when owning pays off.")
    assert "Enter the purchase price on the Costs page" in cost_answer(c)


def test_no_busy_hours_says_so_instead_of_extrapolating() -> None:
    idle = Usage(window_s=2 * 86400.0, busy_s=0.0, energy_kwh=0.3)
    c = compare(LAPTOP, 16376.0, idle, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    assert cost_answer(c) == ("No busy hours in 2 recorded days: nothing to rent yet, and owning costs "
                              "83.33 USD a month in depreciation.")


def test_a_stress_run_that_measured_nothing_usable_is_not_asked_for_again() -> None:
    c = compare(LAPTOP, 16376.0, dataclasses.replace(USAGE, stress_runs=1), INPUTS, offers=[RUNPOD_4090],
                specs=SPECS)
    assert not any("run a stress test" in n for n in c.notes)
    assert any("GEMM" in n for n in c.notes)
    fresh = compare(LAPTOP, 16376.0, USAGE, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    assert any("run a stress test" in n for n in fresh.notes)
