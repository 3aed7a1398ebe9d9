"""The demo week has jobs (the Jobs page and `rigscope jobs` show them; only the README's screenshot had any), and
their figures obey the bounds the other pages obey: each card is built from the demo's own samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from advisor.job_card import JobCard
from desktop import cli
from desktop.config import CostSettings
from desktop.history.store import HistoryStore
from desktop.jobs.card import job_frame, job_gpus
from desktop.sessions.jobs_reader import JobsHistory
from desktop.telemetry.scenarios import week_start
from tests.unit.test_consistency_jobs import AT_LIMIT

#: Thursday 12:00 UTC to Friday 02:24 of the demo week: the data-loader-starved run (Thu 13:00 - Fri 01:00).
WEEK = week_start(1_795_000_000.0)
NOW_S = WEEK + 4 * 86400.0 + 2.4 * 3600.0
DAYS = 0.6


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RIGSCOPE_CONFIG_DIR", str(path.parent / "config"))
        patch.setenv("RIGSCOPE_DATA_DIR", str(path.parent / "data"))
        assert cli.main(["demo", "--db", str(path), "--days", str(DAYS), "--json"], now_s=NOW_S) == 0
    return path


def test_rigscope_demo_writes_the_weeks_jobs_and_rigscope_jobs_lists_them(
        demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["jobs", "--db", str(demo_db), "--json"], now_s=NOW_S) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [j["name"] for j in listed] == ["train_dataloader.py"]
    assert listed[0]["source"] == "simulated" and listed[0]["card"] is not None
    page = JobsHistory(demo_db, CostSettings(), clock=lambda: NOW_S)
    assert [r.name for r in page.jobs()] == ["train_dataloader.py"]  # the Jobs page's list
    assert cli.main(["jobs", "show", str(listed[0]["job_id"]), "--db", str(demo_db)], now_s=NOW_S) == 0
    shown = capsys.readouterr().out
    # The CPU is saturated meanwhile (the Advisor says "starved by the CPU"): the card names the same bottleneck.
    assert "the CPU limits this job: a faster GPU would not help much" in shown
    assert "x overall: its GPU-bound" in shown  # never a bare datasheet ratio


def test_the_demo_jobs_cards_agree_with_the_samples_they_were_built_from(demo_db: Path) -> None:
    with HistoryStore.open(demo_db, readonly=True) as store:
        for record in store.jobs():
            assert record.card is not None
            card = JobCard.from_dict(record.card)
            frame = job_frame(store, record, NOW_S)
            gpu = job_gpus(record, frame)[0]
            rows = (gpu.time_s >= record.started_s) & (gpu.time_s < card.ended_s)
            figures = card.gpus[0]
            energy_wh = float(np.nansum(gpu.energy_mj[rows])) / 3.6e6
            assert card.energy_wh == pytest.approx(energy_wh, rel=1e-3), "card energy vs the samples' energy"
            assert figures.busy_s <= card.running_s <= card.duration_s
            assert figures.peak_vram_mib is not None and figures.vram_total_mib is not None
            assert figures.peak_vram_mib <= figures.vram_total_mib, "process VRAM above the card's total"
            loaded = rows & (np.nan_to_num(gpu.utilization_gpu_pct) > 10.0)
            mean_w = float(np.nanmean(gpu.power_w[loaded]))
            limit = gpu.meta.power_limit_w or float("inf")
            claim = AT_LIMIT.search(card.verdict)
            assert claim is None or mean_w >= 0.95 * limit, f"{claim} with {mean_w:.0f} W of {limit:g} W"
            # The starved run: busy ~55 % of its time, so a 13x cloud GPU is not 13x faster for it.
            assert card.bound == "cpu" and card.cloud
            assert all(c.overall_speed is not None and c.overall_speed < 2.0 for c in card.cloud)


def test_the_demo_process_samples_never_hold_more_vram_than_the_gpu(demo_db: Path) -> None:
    with HistoryStore.open(demo_db, readonly=True) as store:
        total = {info.uuid: info.vram_total_mib for info in store.gpus()}
        frame = job_frame(store, store.jobs()[0], NOW_S)
    assert frame.processes is not None
    procs = frame.processes
    for index in set(procs.gpu_index.tolist()):
        gpu = frame.gpu(int(index))
        assert gpu is not None
        mine = procs.gpu_index == index
        _times, inverse = np.unique(procs.time_s[mine], return_inverse=True)
        held = np.bincount(inverse, weights=procs.vram_mib[mine])
        assert float(held.max()) <= (total[gpu.meta.uuid] or float("inf")), "processes hold more than the GPU"


def test_demo_help_says_where_it_writes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "demo-history.sqlite" in text and "never in the real history" in text
    assert "default: the one in your data folder" not in text
