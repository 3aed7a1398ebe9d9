"""GPUs by identity, never by index (issue 32): two machines' logs that both say GPU 0, or the local GPU 0
beside an imported GPU 0, are two GPUs in `advise`, `report` and the pages' advice.

Before, the advisor's per-GPU caches were keyed by index: the second GPU 0 got the first one's busy
seconds and `advise` / `report` ended in a numpy-shape traceback ("operands could not be broadcast
together with shapes (4,) (12,)"); process rows were matched by index too, so the local GPU's processes
were counted on the imported one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.profile import gpu_profile
from advisor.stats import busy_seconds
from desktop import cli
from desktop.history.demo import write_demo
from desktop.history.frames import load_frame
from desktop.history.store import HistoryStore
from desktop.telemetry.simulated import parse_profile_list

FIXTURES = Path(__file__).parents[2] / "fixtures"
H800 = FIXTURES / "nvsmi_h800_power_capped_gemm.csv"
H100 = FIXTURES / "nvsmi_h100_pcie_power_capped.csv"
#: The two logs start at 2025-06-10 10:00 UTC; "now" is an hour later.
NOW_S = 1749549600.0 + 3600.0


def _import(db: Path, *logs: Path) -> None:
    assert cli.main(["import", *map(str, logs), "--db", str(db)]) == 0


def _alone_busy_s(db: Path, log: Path, tmp_path: Path) -> float:
    """The busy seconds of the one GPU of ``log`` imported into a database of its own."""
    alone = tmp_path / f"alone-{log.stem}.sqlite"
    _import(alone, log)
    with HistoryStore.open(alone, readonly=True) as store:
        frame = load_frame(store, NOW_S - 86400.0, NOW_S)
    (gpu,) = frame.gpus
    return float(busy_seconds(gpu, frame.processes).sum())


def test_two_machines_logs_that_both_say_gpu_0_give_advice_and_a_report_for_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    _import(db, H800, H100)
    capsys.readouterr()
    assert cli.main(["advise", "--db", str(db), "--days", "1", "--json"], now_s=NOW_S) == 0
    advice = json.loads(capsys.readouterr().out)
    profiles = {p["gpu_key"]: p for p in advice["profiles"]}
    assert len(profiles) == 2 and all(p["gpu_index"] == 0 for p in profiles.values())
    costs = {c["gpu_key"]: c for c in advice["costs"]}
    assert {c["gpu_name"] for c in costs.values()} == {"NVIDIA H800", "NVIDIA H100 PCIe"}
    # Each GPU's own busy time, as when its log is the only one.
    for key, cost in costs.items():
        log = H800 if cost["gpu_name"] == "NVIDIA H800" else H100
        assert profiles[key]["busy_hours"] * 3600.0 == pytest.approx(_alone_busy_s(db, log, tmp_path))
    # The power-capped H800's card is about the H800 (by identity), not "the first GPU 0".
    capped = [r for r in advice["recommendations"] if r["rule_id"] == "power_cap"]
    assert capped and all(costs[r["gpu_key"]]["gpu_name"] == "NVIDIA H800" for r in capped)
    assert cli.main(["advise", "--db", str(db), "--days", "1"], now_s=NOW_S) == 0
    text = capsys.readouterr().out
    assert "GPU 0 (NVIDIA H800):" in text and "GPU 0 (NVIDIA H100 PCIe):" in text
    out = tmp_path / "week.json"
    assert cli.main(["report", "--db", str(db), "--week", "2025-W24", "-o", str(out)], now_s=NOW_S) == 0
    report = json.loads(out.read_text())
    assert sorted(g["name"] for g in report["summary"]["gpus"]) == ["NVIDIA H100 PCIe", "NVIDIA H800"]
    html = tmp_path / "week.html"
    assert cli.main(["report", "--db", str(db), "--week", "2025-W24", "-o", str(html)], now_s=NOW_S) == 0
    # Its card says which GPU 0 it is about.
    assert "(GPU 0 (NVIDIA H800))" in html.read_text()


def test_the_local_gpu_0_keeps_its_processes_beside_an_imported_gpu_0(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    # A recorded (simulated) GPU 0 with its processes, the half hour before the log's end.
    write_demo(db, parse_profile_list("rtx4090-laptop"), days=0.1, now_s=NOW_S - 1800.0)
    with HistoryStore.open(db, readonly=True) as store:
        before = load_frame(store, NOW_S - 86400.0, NOW_S)
    (local,) = before.gpus
    assert before.processes is not None and before.processes.time_s.size > 0
    local_busy = float(busy_seconds(local, before.processes).sum())
    _import(db, H800)
    with HistoryStore.open(db, readonly=True) as store:
        frame = load_frame(store, NOW_S - 86400.0, NOW_S)
    assert [g.meta.index for g in frame.gpus] == [0, 0]
    mine = next(g for g in frame.gpus if g.meta.uuid == local.meta.uuid)
    imported = next(g for g in frame.gpus if g.meta.uuid != local.meta.uuid)
    assert float(busy_seconds(mine, frame.processes).sum()) == pytest.approx(local_busy)
    assert [j.process_names for j in gpu_profile(frame, mine).jobs] == [
        j.process_names for j in gpu_profile(before, local).jobs]
    # The log's own busy time and runs: the local GPU's process lists say nothing of it.
    assert float(busy_seconds(imported, frame.processes).sum()) == pytest.approx(
        _alone_busy_s(db, H800, tmp_path))
    jobs = gpu_profile(frame, imported).jobs
    assert jobs and all(j.process_names == () for j in jobs)
