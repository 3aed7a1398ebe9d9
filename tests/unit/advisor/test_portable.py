"""The portable run record: its JSON form, the errors for a wrong or damaged file, and comparing records."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from advisor.compare_text import flagged_sentence, rows
from advisor.portable import FORMAT, VERSION, Environment, Latency, PortableRecord, Spread, energy_joules
from advisor.portable_read import PortableError, parse_record, record_from_dict
from advisor.run_compare import compare


def _laptop() -> PortableRecord:
    return PortableRecord(
        kind="stress", workload="infer", started_s=1_790_000_000.0, duration_s=120.0,
        environment=Environment(gpu_name="NVIDIA GeForce RTX 4090 Laptop GPU", driver="550.54.14",
                                cuda_driver="12.4", cuda_runtime="12.1", torch="2.3.1", rigscope="0.1.0",
                                power_limit_w=150.0, os="Linux", python="3.11.9"),
        machine="vector", device="cuda:0", dtype="bf16", unit="steps/s", throughput=400.0, peak_throughput=420.0,
        latency=Latency(2.0, 2.5, 3.0), sm_clock_mhz=Spread(2200.0, 2400.0, 2500.0, 2380.0),
        temperature_c=Spread(70.0, 84.0, 87.0, 82.0), power_w=Spread(120.0, 148.0, 150.0, 100.0),
        energy_j=12_000.0, verdict="throttled", verdict_sentence="Throttled after 1 min.", throttled=True,
        price_per_hour=0.25, currency="USD")


def _cloud() -> PortableRecord:
    laptop = _laptop()
    return replace(laptop, machine="ip-10-0-0-12", throughput=1000.0, peak_throughput=1010.0,
                   latency=Latency(1.0, 1.25, 1.5), power_w=Spread(400.0, 500.0, 520.0, 500.0),
                   verdict="passed", throttled=False, price_per_hour=2.99,
                   environment=replace(laptop.environment, gpu_name="NVIDIA H100 80GB HBM3", driver="535.104.05",
                                       power_limit_w=700.0))


def test_a_record_survives_its_json_form() -> None:
    record = _laptop()
    data = json.loads(record.to_json())
    assert data["format"] == FORMAT and data["version"] == VERSION
    assert data["throughput"] == {"sustained": 400.0, "peak": 420.0, "unit": "steps/s"}
    assert data["latency_ms"] == {"p50": 2.0, "p95": 2.5, "p99": 3.0}
    assert parse_record(record.to_json()) == record


def test_unknown_values_are_null_and_read_back_as_unknown() -> None:
    bare = PortableRecord(kind="stress", workload="gemm", started_s=1.0, duration_s=3.0)
    data = json.loads(bare.to_json())
    assert data["throughput"]["sustained"] is None and data["latency_ms"] is None and data["energy_j"] is None
    assert parse_record(bare.to_json()) == bare


@pytest.mark.parametrize(("text", "message"), [
    ('{"format": "rigscope-run", "version": 1, "kind": "str', "not valid JSON (line 1"),
    ("", "not valid JSON"),
    ("[1, 2]", "a JSON list, expected an object"),
    ('{"hello": 1}', 'no "format" field'),
    ('{"format": "gpu-burn", "version": 1}', '"format" is "gpu-burn"'),
    ('{"format": "rigscope-run", "version": 2, "kind": "stress"}', "newer Rigscope (record version 2"),
    ('{"format": "rigscope-run", "version": "1"}', '"version" must be a whole number'),
    ('{"format": "rigscope-run", "version": 1, "kind": "bench", "workload": "gemm", "started_s": 1}',
     '"kind" must be one of stress, job, not "bench"'),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm"}', '"started_s" must be a number'),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1, '
     '"throughput": {"sustained": "fast"}}', '"throughput.sustained" must be a number, not "fast"'),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1, '
     '"throughput": {"sustained": NaN}}', '"throughput.sustained" must be a number'),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1, '
     '"price_per_hour": -3}', '"price_per_hour" must be a number from 0'),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1, '
     '"environment": {"driver": 550}}', '"environment.driver" must be text, not 550'),
    ('{"format": "rigscope-run", "version": 1, "kind": "stress", "workload": "gemm", "started_s": 1, '
     '"verdict": {"throttled": "yes"}}', '"verdict.throttled" must be true or false'),
])
def test_a_wrong_or_damaged_file_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(PortableError, match=None) as caught:
        parse_record(text)
    assert message in str(caught.value)


def test_a_deeply_nested_file_is_refused_not_a_crash() -> None:
    with pytest.raises(PortableError):
        parse_record("[" * 100_000 + "]" * 100_000)


def test_record_from_dict_refuses_what_is_not_an_object() -> None:
    with pytest.raises(PortableError, match="a JSON null"):
        record_from_dict(None)


def test_spread_leaves_out_what_was_not_read() -> None:
    spread = Spread.of(np.array([np.nan, 10.0, 20.0, 30.0, np.nan]))
    assert spread.p50 == 20.0 and spread.mean == 20.0 and spread.p5 == pytest.approx(11.0)
    assert Spread.of(np.array([np.nan, np.nan])).empty and Spread.of([]).empty


def test_energy_prefers_the_counter_and_falls_back_to_power() -> None:
    time_s = np.array([0.0, 1.0, 2.0, 3.0])
    power = np.array([100.0, 100.0, 100.0, 100.0])
    counter_mj = np.array([np.nan, 5_000_000.0, 5_150_000.0, 5_300_000.0])  # 300 J over the read part
    assert energy_joules(time_s, power, counter_mj) == pytest.approx(300.0)
    assert energy_joules(time_s, power) == pytest.approx(300.0)  # 100 W x 3 s
    reset = np.array([9e9, 1.0, 2.0, 3.0])  # the counter went back (driver reload): power it is
    assert energy_joules(time_s, power * 2, reset) == pytest.approx(600.0)
    assert energy_joules(time_s, np.full(4, np.nan)) is None and energy_joules(time_s, None) is None


def test_compare_two_machines_flags_the_driver_difference() -> None:
    comparison = compare([_laptop(), _cloud()])
    laptop, cloud = comparison.columns
    assert laptop.throughput_ratio == 1.0 and cloud.throughput_ratio == pytest.approx(2.5)
    assert cloud.latency_ratios == Latency(0.5, 0.5, 0.5)
    # 400 steps/s at 100 W mean vs 1000 steps/s at 500 W: the laptop does twice the work per joule.
    assert laptop.work_per_joule == pytest.approx(4.0) and cloud.work_per_joule == pytest.approx(2.0)
    assert cloud.work_per_joule_ratio == pytest.approx(0.5)
    # 0.25 $/h for 400 steps/s vs 2.99 $/h for 1000 steps/s.
    assert laptop.cost_per_unit == pytest.approx(0.25 / 3600 / 400)
    assert cloud.cost_ratio == pytest.approx((2.99 / 1000) / (0.25 / 400))
    flagged = {d.key: d for d in comparison.flagged}
    assert set(flagged) == {"driver", "power_limit_w"}
    assert flagged["driver"].values == ("550.54.14", "535.104.05")
    gpu = next(d for d in comparison.differences if d.key == "gpu_name")
    assert gpu.differs and not gpu.flagged  # the GPU is what is being compared
    torch = next(d for d in comparison.differences if d.key == "torch")
    assert not torch.differs and not torch.flagged
    assert comparison.notes == ()
    sentence = flagged_sentence(comparison)
    assert "NVIDIA driver 550.54.14 vs 535.104.05" in sentence and "power limit 150 W vs 700 W" in sentence


def test_the_same_environment_flags_nothing_and_a_close_power_limit_is_the_same() -> None:
    laptop = _laptop()
    again = replace(laptop, throughput=380.0,
                    environment=replace(laptop.environment, power_limit_w=152.0))
    comparison = compare([laptop, again])
    assert comparison.flagged == ()
    assert comparison.columns[1].throughput_ratio == pytest.approx(0.95)
    assert flagged_sentence(comparison).startswith("No driver")


def test_an_unknown_value_is_not_a_difference() -> None:
    laptop = _laptop()
    cpu = replace(laptop, environment=replace(laptop.environment, driver=None, cuda_driver=None))
    assert {d.key for d in compare([laptop, cpu]).flagged} == set()


def test_different_units_are_not_ratioed_and_say_why() -> None:
    gemm = replace(_laptop(), workload="gemm", unit="TFLOP/s", throughput=60.0, latency=None)
    comparison = compare([_laptop(), gemm])
    assert comparison.columns[1].throughput_ratio is None and comparison.columns[1].cost_ratio is None
    assert any("measure different things" in n for n in comparison.notes)
    assert any("different workloads" in n for n in comparison.notes)


def test_different_currencies_are_not_costed_against_each_other() -> None:
    euro = replace(_cloud(), currency="EUR")
    comparison = compare([_laptop(), euro])
    assert comparison.columns[1].cost_per_unit is not None and comparison.columns[1].cost_ratio is None
    assert any("currencies" in n for n in comparison.notes)


def test_compare_needs_two_records() -> None:
    with pytest.raises(ValueError, match="two or more"):
        compare([_laptop()])


def test_rows_carry_units_ratios_and_flags() -> None:
    table = {row.label: row for row in rows(compare([_laptop(), _cloud()]))}
    assert table["throughput (sustained)"].cells == ("400 steps/s (1.00×)", "1,000 steps/s (2.50×)")
    assert table["latency p99"].cells == ("3 ms (1.00×)", "1.5 ms (0.50×)")
    assert table["work per joule"].cells[1] == "2 steps/J (0.50×)"
    assert table["cost of work"].cells[0] == "0.174 USD per 1M steps (1.00×)"
    assert table["energy"].cells[0] == "12.0 kJ"
    assert table["NVIDIA driver"].flagged and not table["GPU"].flagged and table["GPU"].differs
    assert table["price"].cells == ("0.25 USD/h", "2.99 USD/h")
