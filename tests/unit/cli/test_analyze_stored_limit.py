"""`rigscope analyze` on a stored range judges the run against the limit in force then (issue 32).

A laptop (RTX 4080 Laptop GPU, 80 W base) ran a job held at its then-enforced 80 W; afterwards Dynamic Boost
raised its limit to 175 W, which is the GPU's last limit read. Before, the stored range was judged against that
one `GpuInfo.power_limit_enforced_w`: "power cap active 100 % of the load at 79 W, 45 % of its 175 W power limit:
another limit than the board power".
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from desktop import cli
from desktop.cli.common import iso_local
from desktop.history.store import HistoryStore
from tests.unit.history.helpers import FULL_INFO, FULL_SAMPLE, snapshot

T0 = 1_790_000_000.0
LAPTOP = dataclasses.replace(FULL_INFO, name="NVIDIA GeForce RTX 4080 Laptop GPU", power_limit_enforced_w=80.0,
                             power_limit_default_w=80.0, power_limit_max_w=175.0, sm_clock_max_mhz=3105.0)


def _history(db: Path) -> None:
    capped = dataclasses.replace(FULL_SAMPLE, utilization_gpu_pct=100.0, power_w=79.0, sm_clock_mhz=1500.0,
                                 temperature_c=70.0, clock_event_reasons=0x4, clock_event_sw_power_cap_s=1.0,
                                 clock_event_sw_thermal_s=0.0, clock_event_hw_thermal_s=0.0)
    idle = dataclasses.replace(capped, utilization_gpu_pct=0.0, power_w=8.0, sm_clock_mhz=210.0,
                               clock_event_reasons=0x1, clock_event_sw_power_cap_s=0.0)
    boosted = dataclasses.replace(LAPTOP, power_limit_enforced_w=175.0)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i, info=LAPTOP, sample=capped) for i in range(600)])
        store.write_snapshots([snapshot(T0 + 600 + i, info=boosted, sample=idle) for i in range(300)])


def test_a_stored_run_at_its_then_enforced_80_w_is_judged_at_its_80_w_limit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    _history(db)
    with HistoryStore.open(db, readonly=True) as store:
        assert store.gpus()[0].power_limit_enforced_w == 175.0  # the last limit read
    span = ["--from", iso_local(T0), "--to", iso_local(T0 + 900)]
    capsys.readouterr()
    assert cli.main(["analyze", "--db", str(db), *span]) == 0
    out = capsys.readouterr().out
    assert "of its 175 W" not in out and "another limit than the board power" not in out
    assert "at its 80 W power limit" in out
    assert cli.main(["analyze", "--db", str(db), *span, "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)
    assert (run["power_cap"], run["power_limit_w"]) == ("at_limit", 80.0)
