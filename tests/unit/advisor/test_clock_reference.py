"""The clock reference (issue 32 item 3): a verdict says the clock against a clock the GPU sustains.

Ada drivers report the V/F curve's top, 3,105 MHz, as the max SM clock (every Ada capture in
../shared/realdata); an RTX 40 laptop at an 80 W limit runs near 1,270 MHz, which the old verdict
called "41 % of the GPU's reported max (3,105 MHz)".
"""

from __future__ import annotations

import re

import numpy as np

from advisor.clock_reference import ClockReference, choose_reference, is_vf_top
from advisor.verdict import RunTrace, judge


def laptop_at_80_w(n: int = 300, **kwargs: object) -> RunTrace:
    """An RTX 4080 Laptop held at its 80 W limit: power at the limit, the cap bit on, ~1,270 MHz."""
    rng = np.random.default_rng(80)
    clocks = np.round(rng.normal(1270.0, 20.0, n) / 15.0) * 15.0
    return RunTrace(time_s=np.arange(float(n)), throughput=rng.normal(30.0, 0.3, n), unit="TFLOP/s",
                    sm_clock_mhz=clocks, sm_clock_max_mhz=3105.0, power_w=rng.normal(79.5, 0.5, n),
                    power_limit_w=80.0, clock_event_reasons=np.full(n, 4.0),
                    **kwargs)  # type: ignore[arg-type]


def test_an_80_w_ada_laptop_run_is_not_said_against_the_v_f_top() -> None:
    verdict = judge(laptop_at_80_w())
    assert verdict.status == "passed"
    assert "3,105" not in verdict.sentence and "41 %" not in verdict.sentence, verdict.sentence
    assert verdict.clock_reference_basis == "early"
    assert verdict.clock_reference_mhz is not None and 1240.0 <= verdict.clock_reference_mhz <= 1300.0
    said = re.search(r"the clock at (\d+) % of its early sustained clock \(1,2\d\d MHz\)", verdict.sentence)
    assert said is not None and 97 <= int(said.group(1)) <= 100, verdict.sentence
    assert verdict.sm_clock_max_mhz == 3105.0  # the reported figure is kept, only not used as the reference


def test_the_gpus_own_calibration_comes_first_and_is_named() -> None:
    verdict = judge(laptop_at_80_w(sm_clock_calibration_mhz=1905.0))
    assert verdict.clock_reference_basis == "calibration"
    said = re.search(r"the clock at (\d+) % of its own stress-run calibration \(1,905 MHz\)", verdict.sentence)
    assert said is not None and 65 <= int(said.group(1)) <= 68, verdict.sentence  # ~1,270 of 1,905 MHz


def test_the_order_calibration_reached_max_early_level_datasheet() -> None:
    assert choose_reference(calibration_mhz=1905.0, reported_max_mhz=3105.0, highest_loaded_mhz=1950.0,
                            early_mhz=1935.0, boost_mhz=2040.0) == ClockReference(1905.0, "calibration")
    # An H100 at its cap reached its 1,980 MHz max at moments: a real clock (its customer boost).
    assert choose_reference(reported_max_mhz=1980.0, highest_loaded_mhz=1965.0,
                            early_mhz=1800.0) == ClockReference(1980.0, "reported")
    # Ada's V/F top, never reached: the early level; without one, the datasheet boost clock.
    assert choose_reference(reported_max_mhz=3105.0, highest_loaded_mhz=1950.0,
                            early_mhz=1935.0, boost_mhz=2040.0) == ClockReference(1935.0, "early")
    assert choose_reference(reported_max_mhz=3105.0, boost_mhz=2040.0) == ClockReference(2040.0, "datasheet")
    assert choose_reference(reported_max_mhz=3105.0) is None
    # A log's own highest clock is reached by definition.
    assert choose_reference(reported_max_mhz=1965.0, reported_from_log=True).basis == "log"  # type: ignore[union-attr]


def test_a_v_f_top_by_its_height_or_its_distance_from_the_boost_clock() -> None:
    assert is_vf_top(3105.0) and is_vf_top(3090.0)  # every Ada card; the RTX 5090
    assert not is_vf_top(1980.0) and not is_vf_top(2520.0)  # H100, L40S: their customer boost clocks
    assert is_vf_top(2100.0, boost_mhz=1695.0) and not is_vf_top(2040.0, boost_mhz=2040.0)


def test_each_basis_is_said_in_words() -> None:
    assert ClockReference(1935.0, "early").phrase() == "its early sustained clock (1,935 MHz)"
    assert ClockReference(2040.0, "datasheet").phrase() == "its datasheet boost clock (2,040 MHz)"
    assert ClockReference(1905.0, "calibration").phrase() == "its own stress-run calibration (1,905 MHz)"
    assert ClockReference(1980.0, "reported").phrase() == "the GPU's reported max (1,980 MHz)"
