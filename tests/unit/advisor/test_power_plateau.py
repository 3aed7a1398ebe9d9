"""A power limit no log names, seen in its shape (issue 32, item 2: logs without a limit or a name).

With no limit column, no ``--power-limit`` and a GPU name no datasheet knows, a GEMM that boosts for
a few seconds and then sits on a power plateau with its clock held below its early level was
"Throttled after 30 s: unexplained slowdown". It is held at a power limit near the plateau, and
the sentence says so; flat power at a flat clock (nothing holds the load back) is not.
"""

from __future__ import annotations

import numpy as np

from advisor.log_verdict import verdicts_for_log
from advisor.power_plateau import plateau_level_w
from advisor.verdict import RunTrace, judge


def _log(power_w: np.ndarray, clock_mhz: np.ndarray) -> dict[str, np.ndarray]:
    n = power_w.shape[0]
    return {"utilization_gpu_pct": np.full(n, 100.0), "power_w": power_w, "sm_clock_mhz": clock_mhz,
            "temperature_c": np.full(n, 66.0)}


def _capped_gemm(seconds: int = 300, boost_s: int = 30, seed: int = 1) -> dict[str, np.ndarray]:
    """An H100 PCIe-like GEMM (REFERENCE.md: 348 W on a 350 W limit, the clock far below its 1,755 MHz max):
    boost at 1,755 MHz while the power climbs, then 348 W flat with the clock held near 1,100 MHz."""
    rng = np.random.default_rng(seed)
    power = np.concatenate([np.linspace(240.0, 346.0, boost_s), 348.0 + rng.normal(0.0, 1.5, seconds - boost_s)])
    clock = np.concatenate([np.full(boost_s, 1755.0), 1100.0 + 15.0 * np.round(rng.normal(0.0, 0.6,
                                                                                        seconds - boost_s))])
    return _log(power, clock)


def test_a_plateau_with_the_clock_below_its_early_level_is_held_at_a_power_limit() -> None:
    columns = _capped_gemm()
    (run,) = verdicts_for_log(np.arange(300.0), columns, gpu_name="a GPU no datasheet knows")
    verdict = run.verdict
    assert verdict.power_cap == "plateau" and verdict.power_limited and verdict.power_limit_w is None
    assert verdict.cause == "power_cap", verdict.sentence
    assert "held at a power limit near 348 W (no limit in the log)" in verdict.sentence, verdict.sentence
    assert "unexplained" not in verdict.sentence
    assert verdict.power_level_w is not None and abs(verdict.power_level_w - 348.0) < 1.0


def test_flat_power_at_a_flat_clock_is_no_limit() -> None:
    """A fixed-clock or memory-bound load draws flat power too: nothing holds it back."""
    rng = np.random.default_rng(2)
    columns = _log(200.0 + rng.normal(0.0, 1.0, 300), 1500.0 + 15.0 * np.round(rng.normal(0.0, 0.2, 300)))
    (run,) = verdicts_for_log(np.arange(300.0), columns)
    assert not run.verdict.power_limited and run.verdict.power_cap is None
    assert "power limit" not in run.verdict.sentence and run.verdict.status == "passed", run.verdict.sentence
    assert plateau_level_w(columns["power_w"], columns["sm_clock_mhz"], np.ones(300, dtype=bool)) is None


def test_power_that_moves_while_the_clock_falls_is_no_plateau() -> None:
    """The clock falls but the power is not flat (it falls with it, as under a thermal slowdown): no limit."""
    power = np.linspace(300.0, 180.0, 300)
    clock = np.linspace(1755.0, 1200.0, 300)
    assert plateau_level_w(power, clock, np.ones(300, dtype=bool)) is None
    verdict = judge(RunTrace.from_columns(np.arange(300.0), _log(power, clock)), min_load_s=60.0)
    assert verdict.power_cap is None and "power limit" not in verdict.sentence


def test_a_known_limit_is_used_before_any_plateau() -> None:
    (run,) = verdicts_for_log(np.arange(300.0), _capped_gemm(), power_limit_w=350.0, power_limit_source="given")
    assert run.verdict.power_cap == "at_limit" and run.verdict.power_limit_w == 350.0
    assert run.verdict.power_limit_source == "given" and "near 348 W" not in run.verdict.sentence


def test_a_stress_run_without_a_reported_limit_says_so_not_the_log() -> None:
    """The same shape in a live run (NVML gave no limit): the sentence does not speak of a log."""
    verdict = judge(RunTrace.from_columns(np.arange(300.0), _capped_gemm()), min_load_s=30.0)
    assert "held at a power limit near 348 W (no limit reported)" in verdict.sentence, verdict.sentence
