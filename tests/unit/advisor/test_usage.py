"""Usage accounting: GPU-hours, energy and cost per key, with shared GPUs' energy split by SM, else VRAM share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from advisor.usage import GpuEnergy, ProcessUsageRows, UsageTable, account_usage
from tests.unit.advisor import crafted

T0 = 1_763_942_400.0  # Monday 2025-11-24 00:00 UTC
LABELS = ("ana", "bo", "python train.py", "python infer.py", "docker:trainer (3f2a9c1b4e5d)")
ANA, BO, TRAIN, INFER, TRAINER = range(5)
NAN = float("nan")

# The hand-checked week in miniature. One GPU draws a steady 180 W for 600 s, read as ten 60 s rows
# of 180 W x 60 s = 10,800 J = 3 Wh each: 30 Wh in all. Processes are polled every 60 s:
#   t=0, 60   ana's pid 10 (SM 60 %, 6000 MiB) and bo's pid 20 (SM 20 %, 2000 MiB): SM split 60:20 = 3:1,
#             so each 3 Wh period gives ana 2.25 Wh and bo 0.75 Wh  -> ana 4.50, bo 1.50
#   t=120     pid 10 has no SM figure: the period is split by VRAM, 6000:2000 = 3:1 -> ana 2.25, bo 0.75
#   t=180     bo's pid 20 alone, SM 0 % (idle, holding memory): SM shares say nothing, VRAM gives it all
#             -> bo 3.00
#   t=240     bo's pids 20 and 21 (SM 10 % and 30 %): SM split, all bo's -> bo 3.00
#   t=300-600 nobody: 5 periods x 3 Wh = 15 Wh unattributed
# ana: 4.50 + 2.25 = 6.75 Wh over 3 polls = 180 s = 0.05 GPU-h
# bo:  1.50 + 0.75 + 3.00 + 3.00 = 8.25 Wh over 5 polls = 300 s (t=240 counted once, not per pid) = 0.0833 GPU-h
# split: by SM share 3 + 3 + 3 = 9 Wh (60 %), by VRAM share 3 + 3 = 6 Wh (40 %); cost at 0.30/kWh:
# ana 0.00675 kWh x 0.30 = 0.002025, bo 0.00825 kWh x 0.30 = 0.002475; shares 45 % and 55 %.
ROWS = [  # (t, pid, sm %, vram MiB, user, command, container)
    (0, 10, 60.0, 6000.0, ANA, TRAIN, TRAINER), (0, 20, 20.0, 2000.0, BO, INFER, -1),
    (60, 10, 60.0, 6000.0, ANA, TRAIN, TRAINER), (60, 20, 20.0, 2000.0, BO, INFER, -1),
    (120, 10, NAN, 6000.0, ANA, TRAIN, TRAINER), (120, 20, 20.0, 2000.0, BO, INFER, -1),
    (180, 20, 0.0, 2000.0, BO, INFER, -1),
    (240, 20, 10.0, 2000.0, BO, INFER, -1), (240, 21, 30.0, 1000.0, BO, INFER, -1),
]


def rows(data: Sequence[tuple[float, int, float, float, int, int, int]] = ROWS, period_s: float = 60.0,
         gpu_uuids: tuple[str, ...] = ("GPU-a",), gpu: list[int] | None = None) -> ProcessUsageRows:
    t, pid, sm, vram, user, command, container = (np.array(c) for c in zip(*data, strict=True))
    return ProcessUsageRows(
        time_s=T0 + t.astype(np.float64), duration_s=np.full(len(data), period_s),
        gpu=np.array(gpu if gpu is not None else [0] * len(data), dtype=np.int64), pid=pid.astype(np.int64),
        vram_mib=vram.astype(np.float64), sm_util_pct=sm.astype(np.float64), user=user.astype(np.int64),
        command=command.astype(np.int64), container=container.astype(np.int64), labels=LABELS, gpu_uuids=gpu_uuids)


def steady(uuid: str = "GPU-a", watts: float = 180.0, seconds: float = 600.0, step_s: float = 60.0) -> GpuEnergy:
    t = T0 + np.arange(0.0, seconds, step_s)
    return GpuEnergy(uuid, t, np.full(t.size, step_s), np.full(t.size, watts * step_s / 3600.0))


def account(by: str = "user", **kwargs: object) -> UsageTable:
    defaults: dict[str, object] = {"start_s": T0, "end_s": T0 + 600.0, "price_per_kwh": 0.30, "currency": "EUR"}
    defaults.update(kwargs)
    return account_usage(rows(), [steady()], by, **defaults)  # type: ignore[arg-type]


def test_the_hand_checked_split_per_user() -> None:
    table = account("user")
    assert [line.key for line in table.lines] == ["bo", "ana"]  # most energy first
    bo, ana = table.lines
    assert ana.energy_wh == pytest.approx(6.75) and bo.energy_wh == pytest.approx(8.25)
    assert ana.gpu_hours == pytest.approx(180 / 3600) and bo.gpu_hours == pytest.approx(300 / 3600)
    assert ana.cost == pytest.approx(0.002025) and bo.cost == pytest.approx(0.002475)
    assert ana.processes == 1 and bo.processes == 2
    assert ana.energy_share_pct == pytest.approx(45.0) and bo.energy_share_pct == pytest.approx(55.0)
    assert table.total_wh == pytest.approx(30.0) and table.unattributed_wh == pytest.approx(15.0)
    assert table.split_wh["sm"] == pytest.approx(9.0) and table.split_wh["vram"] == pytest.approx(6.0)
    assert table.basis == "mixed"
    assert table.basis_text() == ("Energy on shared GPUs is split 60 % of it by SM share, "
                                  "40 % by VRAM share where no SM figure was reported.")


def test_the_same_split_per_command_and_per_container() -> None:
    by_command = {line.key: line.energy_wh for line in account("command").lines}
    assert by_command == pytest.approx({"python infer.py": 8.25, "python train.py": 6.75})
    by_container = {line.key: line.energy_wh for line in account("container").lines}
    assert by_container == pytest.approx({"(no container)": 8.25, "docker:trainer (3f2a9c1b4e5d)": 6.75})


def test_finer_gpu_rows_and_a_range_that_cuts_a_period_give_the_matching_part() -> None:
    # 1 s energy rows instead of 60 s: the same 3 Wh a minute, so the same split.
    fine = account_usage(rows(), [steady(step_s=1.0)], "user", start_s=T0, end_s=T0 + 600.0, price_per_kwh=0.3,
                         currency="EUR")
    assert {line.key: line.energy_wh for line in fine.lines} == pytest.approx({"ana": 6.75, "bo": 8.25})
    # From t=30 to t=90: the rows at t=0 fall outside (a row belongs to where it starts); t=60 counts 30 s of
    # its period (until the range ends): 1.5 Wh split 3:1 -> ana 1.125, bo 0.375.
    cut = account_usage(rows(), [steady()], "user", start_s=T0 + 30.0, end_s=T0 + 90.0, price_per_kwh=0.3,
                        currency="EUR")
    assert {line.key: line.energy_wh for line in cut.lines} == pytest.approx({"ana": 1.125, "bo": 0.375})
    assert {line.key: line.gpu_hours for line in cut.lines} == pytest.approx({"ana": 30 / 3600, "bo": 30 / 3600})
    assert cut.total_wh == pytest.approx(3.0)  # 60 s of the GPU at 180 W


def test_only_sm_or_only_vram_is_said_plainly() -> None:
    sm_only = account_usage(rows(ROWS[:4]), [steady()], "user", start_s=T0, end_s=T0 + 600.0, price_per_kwh=0.3,
                            currency="EUR")
    assert sm_only.basis == "sm" and "by each process's SM share" in sm_only.basis_text()
    no_sm = [(t, pid, NAN, vram, u, c, k) for t, pid, _, vram, u, c, k in ROWS]
    vram_only = account_usage(rows(no_sm), [steady()], "user", start_s=T0, end_s=T0 + 600.0, price_per_kwh=0.3,
                              currency="EUR")
    assert vram_only.basis == "vram" and "by VRAM share" in vram_only.basis_text()


def test_unknown_users_and_gpus_without_energy_still_count_hours() -> None:
    data = [(0, 7, 50.0, 100.0, -1, -1, -1)]
    table = account_usage(rows(data, gpu_uuids=("GPU-gone",)), [steady()], "user", start_s=T0, end_s=T0 + 600.0,
                          price_per_kwh=0.3, currency="EUR")
    (line,) = table.lines
    assert line.key == "(unknown user)" and line.gpu_hours == pytest.approx(60 / 3600) and line.energy_wh == 0.0
    assert table.total_wh == 0.0 and table.basis == "none"


def test_two_gpus_are_split_separately() -> None:
    data = [(0, 10, 50.0, 1000.0, ANA, TRAIN, -1), (0, 20, 50.0, 1000.0, BO, INFER, -1)]
    table = account_usage(rows(data, gpu_uuids=("GPU-a", "GPU-b"), gpu=[0, 1]),
                          [steady("GPU-a", 180.0), steady("GPU-b", 60.0)], "user", start_s=T0, end_s=T0 + 60.0,
                          price_per_kwh=0.3, currency="EUR")
    # each alone on its GPU for its first minute: ana 180 W x 60 s = 3 Wh, bo 60 W x 60 s = 1 Wh
    assert {line.key: line.energy_wh for line in table.lines} == pytest.approx({"ana": 3.0, "bo": 1.0})


def test_energy_of_a_history_series_is_the_counter_else_power_times_time() -> None:
    series = crafted.gpu()
    energy = GpuEnergy.of(series)
    # crafted rows are 60 s at their power; where the counter is NaN power x time stands in
    expected = np.where(np.isfinite(series.energy_mj), series.energy_mj / 3.6e6,
                        np.nan_to_num(series.power_w) * series.duration_s / 3600.0)
    assert energy.energy_wh == pytest.approx(expected)
    end = series.time_s[-1] + series.duration_s[-1]
    assert float(energy.cumulative_at(np.array([end]))[0]) == pytest.approx(float(expected.sum()))


# --- busy GPU-hours (issue 22): the one busy definition, per key ----------------------------------


def test_busy_gpu_hours_count_compute_processes_while_the_gpu_was_busy() -> None:
    """Holding memory is not work: Xorg on a desktop at 3 % all day had as many GPU-hours as a training run."""
    data = [(t, 900, NAN, 300.0, BO, INFER, -1) for t in range(0, 600, 60)]  # Xorg: a graphics process
    data += [(t, 10, 90.0, 6000.0, ANA, TRAIN, TRAINER) for t in range(0, 300, 60)]  # training, first 5 minutes
    table_rows = rows(data)
    compute = np.array([row[1] != 900 for row in data])
    kinds = ProcessUsageRows(**{**table_rows.__dict__, "compute": compute})
    t = T0 + np.arange(0.0, 600.0, 60.0)
    busy = np.where(t < T0 + 300.0, 60.0, 0.0)  # busy while the training ran, the desktop's 3 % after
    energy = GpuEnergy("GPU-a", t, np.full(t.size, 60.0), np.full(t.size, 3.0), busy_s=busy)
    table = account_usage(kinds, [energy], "user", start_s=T0, end_s=T0 + 600.0, price_per_kwh=0.3, currency="EUR")
    by_key = {line.key: line for line in table.lines}
    assert by_key["bo"].gpu_hours == pytest.approx(600.0 / 3600.0)  # it held memory all along ...
    assert by_key["bo"].busy_gpu_hours == 0.0  # ... and did no work
    assert by_key["ana"].busy_gpu_hours == pytest.approx(300.0 / 3600.0)
    as_json = {line["key"]: line for line in table.to_dict()["lines"]}  # type: ignore[attr-defined]
    assert as_json["ana"]["busy_gpu_hours"] == pytest.approx(round(300.0 / 3600.0, 4))
    # Without the GPU's busy seconds the busy hours are unknown, not zero.
    unknown = account_usage(kinds, [steady()], "user", start_s=T0, end_s=T0 + 600.0, price_per_kwh=0.3,
                            currency="EUR")
    assert all(line.busy_gpu_hours is None for line in unknown.lines)
