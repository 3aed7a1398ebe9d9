"""`rigscope analyze` on a laptop log whose enforced limit moves under load (issue 32, Dynamic Boost).

The fixture (tests/fixtures/make_dynamic_boost_fixture.py, published RTX 4080 Laptop figures cited
there): run 1 held at the 80 W base; run 2 with the limit stepping 80 -> 105 -> 150 -> 175 W; the
log ends at 175 W. Judged against that last value, run 1 read "45 % of its 175 W power limit:
another limit than the board power". The log's timestamps are local wall time, so the times in
the sentence are the file's own on any machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from desktop.cli import main
from desktop.history.nvsmi_csv import parse_nvsmi_csv

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "nvsmi_rtx4080_laptop_dynamic_boost.csv"


def test_the_log_gives_the_limit_of_each_row_and_keeps_the_static_fact() -> None:
    result = parse_nvsmi_csv(FIXTURE, now_s=2e9)
    ((key, (time_s, columns)),) = result.series.items()
    limits = columns["power_limit_w"]
    assert limits.shape == time_s.shape and np.isfinite(limits).all()
    assert sorted(set(limits.tolist())) == [80.0, 105.0, 150.0, 175.0]
    # power.limit is [N/A] on a laptop: the enforced column gives every row's value.
    assert result.info[key]["power_limit_enforced_w"] == 175.0  # the GPU's metadata: the last value, as before


def test_the_requested_limit_fills_a_row_where_the_enforced_one_is_missing() -> None:
    lines = ["timestamp, utilization.gpu [%], power.draw [W], power.limit [W], enforced.power.limit [W]",
             "2025/06/12 10:00:00, 100 %, 79.00 W, 90.00 W, 80.00 W",
             "2025/06/12 10:00:01, 100 %, 79.00 W, 90.00 W, [N/A]",
             "2025/06/12 10:00:02, 100 %, 79.00 W, [N/A], [N/A]"]
    ((_, (_, columns)),) = parse_nvsmi_csv(lines, now_s=2e9).series.items()
    assert columns["power_limit_w"][:2].tolist() == [80.0, 90.0] and np.isnan(columns["power_limit_w"][2])


def test_the_first_run_is_at_its_80_w_limit_and_the_second_is_judged_step_by_step(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(FIXTURE)]) == 0
    first, second = capsys.readouterr().out.strip().splitlines()
    assert first.startswith("GPU 0 NVIDIA GeForce RTX 4080 Laptop GPU, run 1 of 2 (10:00:30, 2 min 30 s): "
                            "Held its speed at its 80 W power limit the whole run"), first
    assert "175 W" not in first and "another limit" not in first
    assert ("run 2 of 2 (10:04:00, 8 min): Held its speed at its 80 W power limit until 10:06, then at its 105 W "
            "limit until 10:08, then at its 150 W limit until 10:10, then at its 175 W limit: the limit moved under "
            "load") in second, second
    assert "another limit" not in second
    # The clock under a limit that moved is not measured against the first limit's early clock (1,566 MHz
    # while the run ended at 2,257 MHz read "clock at 100 % of its early sustained clock (1,566 MHz)").
    assert "of its early sustained clock" not in second and "1,566" not in second

    assert main(["analyze", str(FIXTURE), "--json"]) == 0
    run1, run2 = json.loads(capsys.readouterr().out)
    assert (run1["power_cap"], run1["power_limit_w"], run1["power_limit_steps"]) == ("at_limit", 80.0, [])
    steps = run2["power_limit_steps"]
    # Each step judged at its own limit: at it (>= 95 %) nearly all of its load time.
    assert [(s["limit_w"], s["power_cap"]) for s in steps] == [(80.0, "at_limit"), (105.0, "at_limit"),
                                                               (150.0, "at_limit"), (175.0, "at_limit")]
    assert all(s["power_at_limit_share"] > 0.9 and 0.95 * s["limit_w"] <= s["power_level_w"] <= s["limit_w"]
               for s in steps)
    assert [round(s["end_s"] - s["start_s"]) for s in steps] == [120, 120, 120, 120]


def test_the_fixture_is_what_its_script_writes(tmp_path: Path) -> None:
    """The committed log is the deterministic output of tests/fixtures/make_dynamic_boost_fixture.py."""
    from tests.fixtures.make_dynamic_boost_fixture import main as write_fixture

    write_fixture(tmp_path / "log.csv")
    assert (tmp_path / "log.csv").read_bytes() == FIXTURE.read_bytes()
