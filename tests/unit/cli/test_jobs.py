"""The job card from a real history database, its text, and `rigscope jobs [show ID] [--json]` end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from advisor.job_card import JobCard
from desktop import cli
from desktop.advice import load_cloud_offers, load_gpu_specs
from desktop.config import CostSettings
from desktop.history.store import HistoryStore
from desktop.jobs.card import build_card, card_of, card_rows, format_card, job_frame, pause_spans
from desktop.jobs.model import GuardEvent
from tests.unit.cli.jobs_history import END, INFO, START, T0, record, series, write_job_history

COSTS = CostSettings(electricity_price_per_kwh=0.30, currency="EUR")


def _card(db: Path, job_id: int) -> JobCard:
    with HistoryStore.open(db, readonly=True) as store:
        stored = store.job(job_id)
        assert stored is not None
        return card_of(store, stored, store.job_series(job_id), COSTS, now_s=END + 60.0,
                       offers=load_cloud_offers(), specs=load_gpu_specs())


def test_card_from_the_history_matches_the_hand_calculation(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    card = _card(db, write_job_history(db))
    gpu = card.gpus[0]
    # See tests/unit/cli/jobs_history.py for the job. 160 s, 30 s paused, 130 s running.
    assert (card.duration_s, card.paused_s, card.pauses, card.running_s) == (160.0, 30.0, 1, 130.0)
    assert gpu.uuid == INFO.uuid and gpu.sampled_s == pytest.approx(160.0)
    # Busy 120 of the 130 running seconds; mean utilization 120 x 100 % / 130 = 92.3 %.
    assert gpu.busy_s == pytest.approx(120.0) and gpu.busy_share == pytest.approx(120.0 / 130.0)
    assert gpu.mean_util_pct == pytest.approx(12000.0 / 130.0)
    assert gpu.peak_vram_mib == 12000.0 and gpu.headroom_mib == pytest.approx(4376.0)
    # 20 samples x 0.5 s of SW power cap, as the driver counted it.
    assert gpu.throttle_s["sw_power_cap"] == pytest.approx(10.0) and gpu.throttle_timing == "counters"
    assert gpu.throttle_s["hw_thermal"] == 0.0
    # 160 s x 150 W = 24,000 J = 6.667 Wh from the energy counter; x 0.30 EUR/kWh = 0.002 EUR.
    assert card.energy_wh == pytest.approx(24000.0 / 3600.0) and gpu.energy_source == "counter"
    assert card.energy_cost == pytest.approx(24000.0 / 3.6e6 * 0.30)
    assert card.throughput_mean == pytest.approx(10.0) and card.throughput_unit == "it/s"
    # The stress test's 60 TFLOP/s is the local speed; the cheapest offers first.
    assert card.speed_basis == "measured" and card.local_tflops == 60.0
    assert card.cloud and [c.on_demand_usd for c in card.cloud] == sorted(c.on_demand_usd for c in card.cloud)
    # The verdict judged on the job's own throughput (steady 10 it/s), pauses left out.
    assert card.verdict.startswith("Held its speed")


def test_a_stored_card_is_shown_as_stored_and_a_running_job_is_judged_to_now(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    card = _card(db, job_id)
    marked = dataclasses.replace(card, verdict="stored verdict")
    with HistoryStore.open(db) as store:
        store.update_job(record(job_id=job_id, card=marked.as_dict()))
    assert _card(db, job_id).verdict == "stored verdict"
    running_id = write_job_history(db, job=record(ended_s=None, exit_code=None, paused_s=0.0, events=()))
    with HistoryStore.open(db, readonly=True) as store:
        running = store.job(running_id)
        assert running is not None
        frame = job_frame(store, running, T0 + 100.0)
        live = build_card(running, series(), frame, COSTS, now_s=T0 + 100.0)
    assert live.duration_s == 90.0 and live.exit_code is None


def test_pause_spans_close_an_unresumed_pause_at_the_end() -> None:
    job = record(events=(GuardEvent(T0 + 20, "pause", 86.0), GuardEvent(T0 + 30, "resume", 80.0),
                         GuardEvent(T0 + 40, "pause", 86.0)))
    assert pause_spans(job, T0 + 50) == ((T0 + 20, T0 + 30), (T0 + 40, T0 + 50))


def test_format_card_aligns_every_line_with_units(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    card = _card(db, write_job_history(db))
    lines = format_card(card).splitlines()
    rows = card_rows(card)
    width = max(len(label) for label, _ in rows)
    assert len(lines) == len(rows)
    for line, (label, value) in zip(lines, rows, strict=True):  # every value starts in one column
        assert line[: width + 4] == f"  {label:<{width}}  " and line[width + 4:] == value
    joined = " ".join(lines)
    for expected in ("2 min 40 s (exit code 0)", "92 % of the running time", "mean utilization 92 %",
                     "12,000 MiB of 16,376 MiB (4,376 MiB headroom)", "Power cap 10 s (counted by the driver)",
                     "10 it/s mean", "6.67 Wh, 0.002 EUR at 0.3 EUR/kWh", "by the guard 30 s (1 time)",
                     "USD", "x overall: its GPU-bound 92 % at", "x, your stress test)"):
        assert expected in joined, expected


def test_jobs_lists_newest_first_and_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    first = write_job_history(db)
    second = write_job_history(db, job=record(name="later.py", started_s=START + 1.0))
    with HistoryStore.open(db) as store:
        store.update_job(record(job_id=first, card=_card(db, first).as_dict()))
    assert cli.main(["jobs", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["ID", "started", "duration", "status"]
    assert out[1].startswith(str(second)) and "later.py" in out[1] and out[2].startswith(str(first))
    # The stored card gives the busy share, energy and cost; the other job has none yet.
    assert "92 %" in out[2] and "6.67 Wh" in out[2] and "0.002 EUR" in out[2] and "30 s" in out[2]
    assert cli.main(["jobs", "--db", str(db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["job_id"] for d in data] == [second, first]
    assert data[0]["card"] is None and data[1]["card"]["gpus"][0]["busy_s"] == pytest.approx(120.0)
    assert data[1]["argv"] == ["python", "train.py", "--epochs", "3"] and data[1]["duration_s"] == 160.0
    assert data[1]["events"][0]["kind"] == "pause"


def test_jobs_show_prints_the_card_or_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db)], now_s=END + 60.0) == 0
    out = capsys.readouterr().out
    assert "python train.py --epochs 3" in out and "busy" in out and "in the cloud" in out
    assert cli.main(["jobs", str(job_id), "--db", str(db), "--json"], now_s=END + 60.0) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["job_id"] == job_id and JobCard.from_dict(data["card"]).gpus[0].busy_s == pytest.approx(120.0)


@pytest.mark.parametrize(("argv", "message"), [
    (["jobs", "show", "99"], "no job 99"),
    (["jobs", "show"], "which job?"),
    (["jobs", "frobnicate"], "unknown action 'frobnicate'"),
    (["jobs", "list", "3"], "rigscope jobs show 3"),
])
def test_jobs_mistakes_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                          message: str) -> None:
    db = tmp_path / "h.sqlite"
    write_job_history(db)
    assert cli.main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_jobs_without_jobs_or_history_says_how_to_get_some(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore.open(db):
        pass
    assert cli.main(["jobs", "--db", str(db)]) == 0
    assert "rigscope run -- python train.py" in capsys.readouterr().out
    assert cli.main(["jobs", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert cli.main(["jobs", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "no history at" in capsys.readouterr().err


def test_a_job_with_no_samples_still_gets_a_card(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db, job=record(started_s=T0 + 10_000.0, ended_s=T0 + 10_100.0, events=()),
                               stress_tflops=None)
    card = _card(db, job_id)
    assert card.gpus == () and card.energy_wh is None and "No GPU samples" in card.verdict
    assert card.duration_s == 100.0 and "n/a" in format_card(card)


def test_jobs_lists_the_newest_fifty_and_says_how_to_see_every_one(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # A year of recording holds hundreds of jobs: the list reads the newest from the started_s index (issue 38).
    db = tmp_path / "h.sqlite"
    with HistoryStore.open(db) as store:
        ids = [store.add_job(record(name=f"job{n}.py", started_s=START + 60.0 * n, ended_s=START + 60.0 * n + 30.0))
               for n in range(60)]
    assert cli.main(["jobs", "--db", str(db), "--json"]) == 0
    captured = capsys.readouterr()
    assert [d["job_id"] for d in json.loads(captured.out)] == ids[::-1][:50]
    assert "the newest 50 jobs" in captured.err and "--all" in captured.err
    assert cli.main(["jobs", "--db", str(db), "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == [str(i) for i in ids[::-1][:3]]
    assert cli.main(["jobs", "--db", str(db), "--all", "--json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == 60 and captured.err == ""
    assert cli.main(["jobs", "--db", str(db), "--limit", "0"]) == 2
    err = capsys.readouterr().err
    assert "--limit takes a whole number of jobs" in err and len(err.strip().splitlines()) == 1
