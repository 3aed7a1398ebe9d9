"""A laptop's dense bf16 peak follows the power it is allowed; a figure without a TGP stays the datasheet's."""

from __future__ import annotations

import pytest

from advisor.costs import GpuSpec
from advisor.dense_peak import dense_peak, of_peak_clause

LAPTOP = GpuSpec("RTX 4090 Laptop", 76.0, 16.0, peak_at_w=140.0)  # resources/gpu_specs.csv, "at 140 W"
DESKTOP = GpuSpec("RTX 4090", 165.0, 24.0)


def test_an_80_w_laptop_peaks_where_80_w_machines_do_and_says_it_was_scaled() -> None:
    peak = dense_peak(LAPTOP, 80.0)
    assert 50.0 <= peak.tflops <= 58.0  # the 50-58 TFLOP/s at 80 W, not the 140 W figure
    assert peak.basis == "limit"
    assert peak.text() == "57 TFLOP/s dense bf16 peak (76 TFLOP/s at 140 W, scaled to the 80 W limit in force)"


@pytest.mark.parametrize("limit_w", [80.0, 100.0, 115.0, 130.0, 140.0])
def test_more_power_never_means_a_lower_peak(limit_w: float) -> None:
    assert dense_peak(LAPTOP, limit_w).tflops <= dense_peak(LAPTOP, limit_w + 10.0).tflops


def test_above_its_rating_the_chip_gains_nothing_past_its_datasheet_figure() -> None:
    assert dense_peak(LAPTOP, 175.0).tflops == 76.0  # Dynamic Boost's 175 W: the clock ceiling holds
    # ... and the sentence does not claim a scaling that did not happen (the Stress page said "scaled to the
    # 150 W limit in force" for the unscaled 76 TFLOP/s).
    assert dense_peak(LAPTOP, 150.0).text() == \
        "76 TFLOP/s dense bf16 peak (76 TFLOP/s at 140 W; the 150 W limit in force does not lower it)"


@pytest.mark.parametrize("limit_w", [None, 0.0, float("nan")])
def test_without_a_limit_read_the_datasheet_figure_stands_and_says_at_which_tgp(limit_w: float | None) -> None:
    peak = dense_peak(LAPTOP, limit_w)
    assert (peak.tflops, peak.basis) == (76.0, "datasheet_tgp")
    assert peak.source_text() == "the datasheet figure at 140 W: no power limit was read"


def test_a_figure_stated_at_no_tgp_is_not_scaled() -> None:
    peak = dense_peak(DESKTOP, 300.0)
    assert (peak.tflops, peak.basis, peak.source_text()) == (165.0, "datasheet", "the datasheet figure")


def test_the_clause_gives_the_share_of_the_scaled_peak() -> None:
    clause = of_peak_clause(48.6, dense_peak(LAPTOP, 80.0))  # of 57.4 TFLOP/s, shown as 57
    assert clause.startswith("sustained 48.6 TFLOP/s: 85 % of its 57 TFLOP/s dense bf16 peak (")
