"""Own vs rent: worked examples, checked by hand in the comments."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.costs import (
    CloudOffer,
    CostInputs,
    GpuSpec,
    Usage,
    break_even_curve,
    compare,
    find_spec,
    smallest_fitting,
)

SPECS = [GpuSpec("RTX 4090 Laptop", 76, 16), GpuSpec("RTX 4090", 165, 24), GpuSpec("H100 SXM", 989, 80),
         GpuSpec("A100 80GB", 312, 80)]
RUNPOD_4090 = CloudOffer("RunPod", "RTX 4090", 24, 0.69, 0.34, "skypilot", "2026")
LAMBDA_H100 = CloudOffer("Lambda", "H100 SXM", 80, 3.29, None, "skypilot", "2026")
RUNPOD_A100 = CloudOffer("RunPod", "A100 80GB PCIe", 80, 1.64, 1.19, "skypilot", "2026")
LAPTOP = "NVIDIA GeForce RTX 4090 Laptop GPU"
WEEK_S = 7 * 86400.0
# One week of history: 25 busy hours and 4.2 kWh; electricity 0.20 $/kWh; a 3,000 $ laptop over 36 months.
USAGE = Usage(window_s=WEEK_S, busy_s=25 * 3600.0, energy_kwh=4.2, peak_vram_mib=15000.0)
INPUTS = CostInputs(purchase_price=3000.0, amortisation_months=36, electricity_price_per_kwh=0.20)


def test_the_most_specific_spec_wins() -> None:
    assert find_spec(LAPTOP, SPECS).model == "RTX 4090 Laptop"
    assert find_spec("NVIDIA GeForce RTX 4090", SPECS).model == "RTX 4090"
    assert find_spec("A100 80GB PCIe", SPECS).model == "A100 80GB"
    assert find_spec("Tesla T4", SPECS) is None


def test_owned_vs_rented_rtx4090_worked_example() -> None:
    c = compare(LAPTOP, 16376.0, USAGE, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    # busy hours per month: 25 h x 30 d / 7 d = 107.142857 h
    assert c.busy_hours_month == pytest.approx(107.142857, rel=1e-6)
    # energy per month: 4.2 kWh x 30 / 7 = 18.0 kWh -> 18.0 x 0.20 = 3.60 $
    assert c.energy_kwh_month == pytest.approx(18.0)
    assert c.owned_energy_month == pytest.approx(3.60)
    # amortisation: 3000 / 36 = 83.333 $; owned = 83.333 + 3.60 = 86.933 $
    assert c.owned_fixed_month == pytest.approx(83.3333, rel=1e-4)
    assert c.owned_month == pytest.approx(86.9333, rel=1e-4)
    (opt,) = c.options
    # relative speed: 165 / 76 = 2.171053 (datasheet peaks: no stress result)
    assert opt.relative_speed == pytest.approx(2.171053, rel=1e-6)
    # cloud hours: 107.142857 / 2.171053 = 49.3506 h; on demand x 0.69 = 34.0519 $; spot x 0.34 = 16.7792 $
    assert opt.cloud_hours_month == pytest.approx(49.3506, rel=1e-5)
    assert opt.on_demand_month == pytest.approx(34.0519, rel=1e-5)
    assert opt.spot_month == pytest.approx(16.7792, rel=1e-5)
    # break-even: rent per busy hour 0.69 / 2.171053 = 0.317818 $, electricity per busy hour
    # 3.60 / 107.142857 = 0.0336 $; 83.3333 / (0.317818 - 0.0336) = 293.20 busy h/month
    assert opt.break_even_busy_hours_month == pytest.approx(293.20, rel=1e-4)
    # payback: the laptop saves 34.0519 - 3.60 = 30.4519 $/month of renting -> 3000 / 30.4519 = 98.52 months
    assert opt.payback_months == pytest.approx(98.52, rel=1e-4)
    # a bigger GPU for jobs the 16 GB laptop cannot hold: the 24 GB RTX 4090 at RunPod
    assert c.bigger_option == RUNPOD_4090
    assert any("datasheet" in n for n in c.notes)


def test_serving_hours_are_priced_per_wall_hour() -> None:
    # of the 25 busy hours a week, 14 look like inference serving: 14 x 30 / 7 = 60 h/month of
    # serving and 107.142857 - 60 = 47.142857 h/month of training-like work
    usage = dataclasses.replace(USAGE, serving_s=14 * 3600.0)
    c = compare(LAPTOP, 16376.0, usage, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    (opt,) = c.options
    # work runs 165/76 times faster: 47.142857 x 76 / 165 = 21.714286 h; serving stays 60 h -> 81.714286 h
    assert opt.cloud_hours_month == pytest.approx(81.714286, rel=1e-6)
    # x 0.69 $/h = 56.382857 $/month
    assert opt.on_demand_month == pytest.approx(56.382857, rel=1e-6)
    # rent per busy hour: 0.69 x 81.714286 / 107.142857 = 0.526240 $; minus electricity 0.0336 $ = 0.492640 $;
    # break-even: 83.3333 / 0.492640 = 169.157 busy h/month
    assert opt.break_even_busy_hours_month == pytest.approx(169.157, rel=1e-4)
    assert any("inference serving" in n for n in c.notes)


def test_measured_stress_result_sets_the_relative_speed() -> None:
    usage = Usage(window_s=WEEK_S, busy_s=25 * 3600.0, energy_kwh=4.2, measured_tflops=60.0)
    c = compare(LAPTOP, 16376.0, usage, INPUTS, offers=[LAMBDA_H100, RUNPOD_A100], specs=SPECS)
    by_model = {o.offer.gpu_model: o for o in c.options}
    # H100: 989 x 0.80 (realistic share of peak) / 60 measured = 13.1867x; 107.142857 / 13.1867 = 8.1251 h
    # x 3.29 $ = 26.731 $/month
    h100 = by_model["H100 SXM"]
    assert h100.relative_speed == pytest.approx(13.18667, rel=1e-5)
    assert h100.on_demand_month == pytest.approx(26.731, rel=1e-4)
    # A100 80GB: 312 x 0.8 / 60 = 4.16x; 107.142857 / 4.16 = 25.7555 h x 1.64 = 42.239 $; spot x 1.19 = 30.649 $
    a100 = by_model["A100 80GB PCIe"]
    assert a100.on_demand_month == pytest.approx(42.239, rel=1e-4)
    assert a100.spot_month == pytest.approx(30.649, rel=1e-4)
    assert [o.offer.gpu_model for o in c.options] == ["H100 SXM", "A100 80GB PCIe"]  # cheapest first
    assert c.local_tflops == 60.0


def test_no_purchase_price_and_other_currency_are_noted() -> None:
    inputs = CostInputs(purchase_price=0.0, amortisation_months=36, electricity_price_per_kwh=0.29, currency="EUR")
    c = compare(LAPTOP, 16376.0, USAGE, inputs, offers=[RUNPOD_4090], specs=SPECS)
    # owned = electricity only: 18 kWh x 0.29 = 5.22
    assert c.owned_month == pytest.approx(5.22)
    assert c.options[0].payback_months is None
    # no price: no break-even at all (it read "0 h" on the History page and "-" on the Costs page)
    assert c.options[0].break_even_busy_hours_month is None and not c.priced
    assert any("purchase price" in n for n in c.notes) and any("EUR" in n for n in c.notes)


def test_unknown_gpu_gives_no_cloud_rows_but_owned_cost() -> None:
    c = compare("Tesla T4", 15360.0, USAGE, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    assert c.options == () and c.local_spec is None
    assert c.owned_month == pytest.approx(86.9333, rel=1e-4)


def test_smallest_fitting_picks_the_cheapest_of_the_smallest_size() -> None:
    offers = [LAMBDA_H100, RUNPOD_A100, RUNPOD_4090]
    assert smallest_fitting(offers, 20.0) == RUNPOD_4090
    assert smallest_fitting(offers, 30.0) == RUNPOD_A100  # 80 GB: 1.64 beats 3.29
    assert smallest_fitting(offers, 100.0) is None


def test_break_even_curve_crosses_at_the_break_even_hours() -> None:
    c = compare(LAPTOP, 16376.0, USAGE, INPUTS, offers=[RUNPOD_4090], specs=SPECS)
    hours, owned, rented = break_even_curve(c, c.options[0], max_hours=600.0, points=601)
    crossing = next(h for h, o, r in zip(hours, owned, rented, strict=True) if r >= o)
    assert crossing == pytest.approx(c.options[0].break_even_busy_hours_month, abs=1.0)
    assert owned[0] == pytest.approx(83.3333, rel=1e-4) and rented[0] == 0.0
