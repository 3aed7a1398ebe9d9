"""The demo week's advice says nothing its own evidence contradicts: "held at its power limit" only where the
power while capped is at >= 95 % of the limit (advisor/power_cap.py's rule); "held far below its power
limit" on battery only where the power on battery is far below it."""

from __future__ import annotations

from advisor.rules import run_rules
from tests.unit.advisor.demo_frame import demo_week_frame

AT_LIMIT_SHARE = 0.95
FAR_BELOW_SHARE = 0.8


def _evidence(rec: object, label: str) -> float:
    found = [e.value for e in rec.evidence if e.label == label]  # type: ignore[attr-defined]
    assert found, f"{rec.rule_id}: no evidence {label!r}"  # type: ignore[attr-defined]
    return float(found[0])


def test_held_at_its_power_limit_only_at_95_percent_of_it() -> None:
    frame = demo_week_frame()
    limit = frame.gpus[0].meta.power_limit_w or 0.0
    recs = [r for r in run_rules(frame) if r.rule_id == "power_cap"]
    assert recs, "the demo week's capped stretches give a power_cap card"
    for rec in recs:
        mean = _evidence(rec, "Mean power while capped")
        if "held at its power limit" in rec.title:
            assert mean >= AT_LIMIT_SHARE * limit, f"{rec.title!r} with {mean:.1f} W of {limit:g} W"


def test_far_below_its_power_limit_on_battery_only_where_the_power_says_so() -> None:
    frame = demo_week_frame()
    limit = frame.gpus[0].meta.power_limit_w or 0.0
    recs = [r for r in run_rules(frame) if r.rule_id == "battery_heavy"]
    assert recs, "the demo week's bench.py hour on battery gives a battery card"
    for rec in recs:
        mean = _evidence(rec, "Mean power meanwhile")
        if "far below its power limit" in rec.action:
            assert mean < FAR_BELOW_SHARE * limit, f"'far below' with {mean:.0f} W of {limit:g} W"
        assert f"{mean:.0f} W" in rec.action, "the action quotes the power it rests on"


def test_minute_rows_that_mix_capped_bursts_and_troughs_are_not_called_at_the_limit() -> None:
    # `advise` over a week reads minute rollups: the data-loader-starved run's minutes each hold ~33 s of capped
    # bursts at 150 W and the troughs between them, so the mean power of the capped minutes reads 99 W of 150 W
    # (the demo week's card said "held at its power limit" beside "Mean power while capped: 99.3 W").
    import numpy as np

    from advisor.frame import GpuMeta, GpuSeries, HistoryFrame

    n = 720  # 12 hours of minute rows
    nan = np.full(n, np.nan)
    meta = GpuMeta(index=0, uuid="GPU-0", name="NVIDIA GeForce RTX 4090 Laptop GPU", vram_total_mib=16376.0,
                   power_limit_w=150.0, is_laptop=True)
    t0 = 1_795_000_000.0
    gpu = GpuSeries(meta=meta, time_s=t0 + 60.0 * np.arange(n), duration_s=np.full(n, 60.0),
                    utilization_gpu_pct=np.full(n, 55.0), utilization_mem_pct=nan, vram_used_mib=np.full(n, 12000.0),
                    temperature_c=np.full(n, 70.0), power_w=np.full(n, 99.0), energy_mj=nan, sm_clock_mhz=nan,
                    mem_clock_mhz=nan, fan_pct=nan, pcie_gen=nan, pcie_width=nan,
                    clock_event_reasons=np.full(n, 0x4, dtype=np.int64), reason_seconds={0x4: np.full(n, 33.0)},
                    busy_s=np.full(n, 60.0))
    frame = HistoryFrame(start_s=t0, end_s=t0 + 60.0 * n, gpus=(gpu,))
    [rec] = [r for r in run_rules(frame) if r.rule_id == "power_cap"]
    assert "held at its power limit" not in rec.title
    assert rec.title == "GPU 0: power cap set under load (mean 99 W of its 150 W limit)"
