"""The nvidia-smi CSV importer on real-format logs, and a fuzz that it never crashes nor drops a valid row."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desktop.history.importer import import_result
from desktop.history.layout import COUNTER_METRICS
from desktop.history.nvsmi_csv import parse_nvsmi_csv
from desktop.history.rollup import run_rollups
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuInfo

UUID_A = "GPU-1b6e3f9d-5c1a-4f0e-9a37-2c8d4e6f7a80"
UUID_B = "GPU-7c2d1e0f-8b9a-4c3d-b2e1-0f9e8d7c6b5a"
DATA = Path(__file__).parent / "data"

# `nvidia-smi --query-gpu=timestamp,index,name,uuid,pci.bus_id,driver_version,pstate,temperature.gpu,
#   utilization.gpu,utilization.memory,memory.total,memory.used,memory.free,power.draw,power.limit,
#   clocks.current.sm,clocks.current.memory,fan.speed,clocks_event_reasons.active,pcie.link.gen.current,
#   pcie.link.width.current --format=csv -l 1` on a two-GPU workstation (one idle).
WITH_UNITS = (DATA / "nvsmi_units_two_gpus.csv").read_text()

# The same kind of log from an older driver, `--format=csv,nounits`, per-reason throttle columns, GPUs by bus id.
NOUNITS = (DATA / "nvsmi_nounits_reasons.csv").read_text()


def _local(y: int, mo: int, d: int, h: int, mi: int, *, s: float) -> float:
    return time.mktime((y, mo, d, h, mi, 0, 0, 0, -1)) + s


def test_log_with_units_two_gpus_hex_masks_and_missing_values() -> None:
    result = parse_nvsmi_csv(WITH_UNITS)
    assert sorted(result.series) == [UUID_A, UUID_B]
    assert result.rows == 5
    assert [line for line, _ in result.skipped] == [6, 8]
    assert "fields where the header has" in result.skipped[0][1] and "lots" in result.skipped[1][1]
    t_a, a = result.series[UUID_A]
    np.testing.assert_allclose(t_a - _local(2024, 5, 14, 9, 0, s=0.101), [0.0, 1.001, 2.002], atol=1e-6)
    assert a["utilization_gpu_pct"].tolist() == [98, 100, 100]
    assert a["power_w"].tolist() == [312.45, 449.80, 450.12]
    assert a["clock_event_reasons"].tolist() == [0, 4, 0x44]
    assert a["pstate"].tolist() == [2, 2, 2]
    assert a["vram_free_mib"].tolist() == [3734] * 3
    assert a["pcie_gen"].tolist() == [4, 4, 4]
    _, b = result.series[UUID_B]
    assert np.isnan(b["power_w"]).all() and np.isnan(b["fan_pct"]).all()
    assert b["clock_event_reasons"].tolist() == [1, 1]
    info = result.info[UUID_B]
    assert info == {"index": 1, "name": "NVIDIA GeForce RTX 4090", "uuid": UUID_B, "pci_bus_id": "00000000:41:00.0",
                    "driver_version": "550.54.14", "vram_total_mib": 24564.0, "power_limit_enforced_w": 450.0}


def test_nounits_log_with_per_reason_columns_and_bus_ids() -> None:
    result = parse_nvsmi_csv(NOUNITS.splitlines())
    assert sorted(result.series) == ["pci:00000000:01:00.0", "pci:00000000:02:00.0"]
    t, one = result.series["pci:00000000:01:00.0"]
    assert t.tolist() == [_local(2023, 2, 1, 23, 59, s=59.5), _local(2023, 2, 2, 0, 0, s=0.5)]
    assert one["clock_event_reasons"].tolist() == [0x4 | 0x20, 0x4]
    assert one["power_w"].tolist() == [149.87, 150.02]
    _, two = result.series["pci:00000000:02:00.0"]
    assert two["clock_event_reasons"].tolist() == [0x1]  # the unknown bit does not hide the known ones
    assert math.isnan(two["power_w"][0])
    assert result.skipped == []


def test_header_repeated_midway_and_data_before_any_header() -> None:
    text = ("2024/01/01 00:00:00.000, 50\n"
            "timestamp, temperature.gpu\n2024/01/01 00:00:01.000, 51\n"
            "timestamp, index, power.draw [W]\n2024/01/01 00:00:02.000, 0, 100.5 W\n"
            "timestamp, index, power.draw [W]\nnot a time, 0, 5 W\n")
    result = parse_nvsmi_csv(text)
    assert result.skipped[0][0] == 1 and "before any header" in result.skipped[0][1]
    assert result.skipped[1][0] == 7 and "timestamp" in result.skipped[1][1]
    t, cols = result.series["index:0"]
    assert len(t) == 2
    assert np.isnan(cols["power_w"][0]) and cols["power_w"][1] == 100.5
    assert cols["temperature_c"][0] == 51 and np.isnan(cols["temperature_c"][1])


def test_a_header_without_timestamp_is_reported() -> None:
    result = parse_nvsmi_csv("index, temperature.gpu\n0, 45\n")
    assert result.rows == 0 and len(result.skipped) == 2


def test_import_into_the_store_is_idempotent_and_matches_known_gpus(tmp_path: Path) -> None:
    log = tmp_path / "gpu.csv"
    log.write_text(NOUNITS)
    known = GpuInfo(index=0, uuid="GPU-known", name="RTX 4070 Laptop", pci_bus_id="00000000:01:00.0")
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        store.write_snapshots([])
        with store.transaction():
            store.ensure_gpu(known, 0.0)
        first = parse_nvsmi_csv(log)
        assert import_result(store, first) == 3
        assert import_result(store, parse_nvsmi_csv(log)) == 0  # the same file again adds nothing
        uuids = {i.uuid: i for i in store.gpus()}
        assert set(uuids) == {"GPU-known", "NVSMI-pci:00000000:02:00.0"}
        assert uuids["GPU-known"] == known  # the richer stored facts are kept
        rows = store.query("GPU-known", ["temperature_c", "power_w", "clock_event_reasons"], 0, 2e9)
        assert rows.columns["temperature_c"].tolist() == [87, 86]
        assert rows.columns["power_w"].tolist() == [149.9, 150.0]  # stored to 0.1 W
        assert rows.columns["clock_event_reasons"].tolist() == [0x24, 0x4]
        # nvidia-smi has no query column for NVML's per-reason time counters: missing, not zero.
        counted = store.query("GPU-known", list(COUNTER_METRICS), 0, 2e9)
        assert all(np.isnan(counted.columns[name]).all() for name in COUNTER_METRICS)
        run_rollups(store, 2e9)
        assert np.isnan(store.query("GPU-known", ["clock_event_sw_power_cap_s"], 0, 2e9,
                                    resolution="minute").columns["clock_event_sw_power_cap_s"]).all()


# --- fuzz -------------------------------------------------------------------------------------

_VALUE = st.one_of(
    st.integers(0, 100).map(str),
    st.integers(0, 100).map(lambda v: f"{v} %"),
    st.sampled_from(["[N/A]", "[Not Supported]", "N/A"]),
)
_POWER = st.one_of(st.floats(0, 1000, allow_nan=False).map(lambda v: f"{v:.2f} W"), st.just("[N/A]"))
_MASK = st.integers(0, 0x7FF).map(lambda v: f"0x{v:016x}")
_ROW = st.tuples(st.integers(0, 1), _VALUE, _POWER, _MASK, st.sampled_from(["P0", "P2", "P8", "[N/A]"]))
_GARBAGE = st.text(max_size=60).filter(lambda s: "timestamp" not in s.lower())


def _expected(cell: str) -> float:
    cell = cell.strip()
    if cell.startswith("[") or cell == "N/A":
        return math.nan
    if cell.startswith("0x"):
        return float(int(cell, 16))
    if cell.startswith("P"):
        return float(cell[1:])
    return float(cell.split()[0])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_ROW.map(lambda r: ("row", r)), _GARBAGE.map(lambda g: ("junk", g))), max_size=40))
def test_fuzz_never_crashes_and_never_drops_a_valid_row(items: list[tuple[str, object]]) -> None:
    lines = ["timestamp, index, utilization.gpu [%], power.draw [W], clocks_event_reasons.active, pstate"]
    expected: dict[str, list[tuple[float, list[float]]]] = {}
    for n, (kind, item) in enumerate(items):
        if kind == "junk":
            lines.append(str(item))
            continue
        index, util, power, mask, pstate = item  # type: ignore[misc]
        lines.append(f"2025/03/09 12:{n // 60:02d}:{n % 60:02d}.250, {index}, {util}, {power}, {mask}, {pstate}")
        expected.setdefault(f"index:{index}", []).append(
            (_local(2025, 3, 9, 12, n // 60, s=n % 60 + 0.25), [_expected(c) for c in (util, power, mask, pstate)]))
    result = parse_nvsmi_csv(lines)
    assert result.rows == sum(len(v) for v in expected.values())
    for key, rows in expected.items():
        times, cols = result.series[key]
        assert times.tolist() == [t for t, _ in rows]
        for i, name in enumerate(("utilization_gpu_pct", "power_w", "clock_event_reasons", "pstate")):
            np.testing.assert_array_equal(cols[name], [v[i] for _, v in rows])
    assert all(isinstance(line, int) and reason for line, reason in result.skipped)


@pytest.mark.parametrize("cell", ["nan", "inf", "1e999", "0xZZ", "12 W W", "--5"])
def test_odd_cells_skip_their_row_only(cell: str) -> None:
    text = f"timestamp, power.draw [W]\n2024/01/01 00:00:00, {cell}\n2024/01/01 00:00:01, 10 W\n"
    result = parse_nvsmi_csv(text)
    assert result.rows == 1 and [line for line, _ in result.skipped] == [2]


# --- real datacenter logs (issue 22): three power columns, memory temperature, two limits ------

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
H800_THREE_POWER = FIXTURES / "nvsmi_h800_three_power_columns.csv"
H100_PCIE = FIXTURES / "nvsmi_h100_pcie_power_capped.csv"


@pytest.mark.parametrize(("log", "limit_w", "instant_peak_w"), [(H800_THREE_POWER, 700.0, 774.0),
                                                                (H100_PCIE, 350.0, 456.0)])
def test_stored_power_is_the_average_never_the_instantaneous_spike(tmp_path: Path, log: Path, limit_w: float,
                                                                    instant_peak_w: float) -> None:
    """An imported H800 log peaked at 774 W on a 700 W card (H100 PCIe: 456 W on 350 W): power.draw.instant won."""
    result = parse_nvsmi_csv(log)
    ((_time_s, columns),) = result.series.values()
    text = log.read_text().splitlines()
    header = [c.split("[")[0].strip() for c in text[0].split(",")]
    average = np.array([float(line.split(",")[header.index("power.draw.average")].split()[0]) for line in text[1:]])
    np.testing.assert_allclose(columns["power_w"], average)
    assert float(np.nanmax(columns["power_w"])) <= limit_w
    # The spike is in the log, on its own column, and not what is stored.
    assert float(np.nanmax(columns["power_instant_w"])) == instant_peak_w
    (info,) = result.info.values()
    assert info["power_limit_enforced_w"] == limit_w
    with HistoryStore.open(tmp_path / "h.sqlite") as store:
        import_result(store, result)
        (gpu,) = store.gpus()
        stored = store.query(gpu.uuid, ["power_w"], 0, 2e9, resolution="raw").columns["power_w"]
        assert stored.size == len(text) - 1 and float(np.nanmax(stored)) <= limit_w
        assert gpu.power_limit_enforced_w == limit_w
    assert "power.draw.instant" in result.unstored and "clocks.gr" in result.ignored


def test_power_draw_alone_is_stored_and_the_average_wins_in_either_column_order() -> None:
    one = parse_nvsmi_csv("timestamp, power.draw [W]\n2025/01/01 00:00:00, 301.5 W\n")
    assert next(iter(one.series.values()))[1]["power_w"].tolist() == [301.5]
    swapped = parse_nvsmi_csv("timestamp, power.draw.instant [W], power.draw.average [W], power.draw [W]\n"
                              "2025/01/01 00:00:00, 774 W, 699 W, 698 W\n"
                              "2025/01/01 00:00:01, 770 W, [N/A], 697 W\n")
    columns = next(iter(swapped.series.values()))[1]
    # The 1 s average where the log has it, power.draw where not; the instant value never.
    assert columns["power_w"].tolist() == [699.0, 697.0]
    assert columns["power_instant_w"].tolist() == [774.0, 770.0]


def test_enforced_limit_wins_over_the_requested_one_and_memory_temperature_is_read() -> None:
    result = parse_nvsmi_csv("timestamp, enforced.power.limit [W], power.limit [W], temperature.memory\n"
                             "2025/01/01 00:00:00, 300 W, 350 W, 71\n")
    (info,) = result.info.values()
    assert info["power_limit_enforced_w"] == 300.0
    ((_t, columns),) = result.series.values()
    assert columns["memory_temperature_c"].tolist() == [71.0]
