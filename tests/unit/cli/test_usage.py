"""`rigscope usage` end to end: a real history file, written by the store as the recorder writes it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from desktop import cli
from desktop.history.store import HistoryStore
from desktop.telemetry.model import GpuProcess
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

T0 = 1_790_000_000.0  # 2026-09-21 (UTC), a Monday
ANA = GpuProcess(pid=10, gpu_index=0, name="python3", user="ana", vram_mib=6000.0, sm_util_pct=60.0,
                 command="python train.py --cfg a.yaml", container="docker:trainer (3f2a9c1b4e5d)")
BO = GpuProcess(pid=20, gpu_index=0, name="python3", user="bo", vram_mib=2000.0, sm_util_pct=20.0,
                command="python infer.py")


@pytest.fixture()
def history(tmp_path: Path) -> Path:
    """Ten minutes at a steady 180 W (power x time, no energy counter), sampled each second; ana's and bo's
    processes polled every 5 s, sharing the GPU 60:20 by SM. 180 W x 600 s = 30 Wh: ana 22.5, bo 7.5."""
    db = tmp_path / "h.sqlite"
    sample = dataclasses.replace(FULL_SAMPLE, power_w=180.0, energy_mj=None)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i, sample=sample, processes=(ANA, BO) if i % 5 == 0 else ())
                               for i in range(600)])
    return db


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["usage", *args], now_s=T0 + 600.0)
    out, err = capsys.readouterr()
    return code, out, err


def test_stored_rows_carry_sm_share_command_and_container(history: Path) -> None:
    with HistoryStore.open(history, readonly=True) as store:
        rows = store.process_usage_rows(T0, T0 + 600.0)
    assert len(rows) == 240 and set(rows.sm_util_pct.tolist()) == {60.0, 20.0}
    assert {rows.labels[i] for i in rows.container.tolist() if i >= 0} == {"docker:trainer (3f2a9c1b4e5d)"}
    assert (rows.duration_s == 5.0).all()


def test_usage_by_user_as_json_splits_energy_by_sm_share(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--db", str(history), "--from", "-10m", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["by"] == "user" and data["split_basis"] == "sm"
    lines = {line["key"]: line for line in data["lines"]}
    assert list(lines) == ["ana", "bo"]
    # the last poll (t=595 s) stands for 5 s like the others: all 30 Wh are attributed, 3:1
    assert lines["ana"]["energy_wh"] == pytest.approx(22.5, abs=0.05)
    assert lines["bo"]["energy_wh"] == pytest.approx(7.5, abs=0.05)
    assert lines["ana"]["gpu_hours"] == pytest.approx(600 / 3600, abs=1e-3)
    assert lines["ana"]["energy_share_pct"] == pytest.approx(75.0, abs=0.1)
    assert data["total_wh"] == pytest.approx(30.0, abs=0.1)


def test_usage_by_command_and_container_as_a_table(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--db", str(history), "--from", "-10m", "--by", "command")
    assert code == 0
    assert out.splitlines()[1].split() == ["command", "GPU", "time", "energy", "share", "cost", "processes"]
    assert "python train.py --cfg a.yaml  10 GPU-min  22.5 Wh  75 %   < 0.01 USD  1" in out
    assert "split by each process's SM share" in out
    code, out, _ = run(capsys, "--db", str(history), "--from", "-10m", "--by", "container")
    assert "docker:trainer (3f2a9c1b4e5d)" in out and "(no container)" in out


def test_a_period_without_processes_says_so(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--db", str(history), "--from", "2026-01-01", "--to", "2026-01-02")
    assert code == 0 and "no GPU processes recorded in this period" in out


def test_bad_input_is_one_message_and_exit_2(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--db", str(history), "--from", "now", "--to", "-1h")
    assert code == 2 and "--to must be after --from" in err
    code, _, err = run(capsys, "--db", str(history.parent / "none.sqlite"))
    assert code == 2 and "no history at" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["usage", "--by", "gpu"])
    assert exc.value.code == 2
    assert "invalid choice: 'gpu'" in capsys.readouterr().err
