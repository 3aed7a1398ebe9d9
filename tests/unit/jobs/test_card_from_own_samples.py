"""The card of a job whose history holds none of its GPU's samples (the recorder writes the history and watches
another GPU) is made from the samples `rigscope run` took itself, so it never says "energy n/a" and "No GPU
samples" beside a run record that holds the job's energy and power."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from advisor.progress import JobSeries
from desktop import config
from desktop.jobs.job_history import JobHistory
from desktop.jobs.job_trace import JobTrace
from desktop.jobs.model import JobRecord
from desktop.sessions.job import SIMULATED_LOAD_NOTE, job_card
from desktop.telemetry.model import GpuInfo, GpuSample
from tests.unit.history.helpers import snapshot

T0 = 1_795_000_000.0
INFO = GpuInfo(index=0, uuid="GPU-sim-4090", name="NVIDIA GeForce RTX 4090 Laptop GPU (simulated)",
               vram_total_mib=16376.0, power_limit_enforced_w=150.0, sm_clock_max_mhz=2040.0, simulated=True)


def test_a_history_without_the_jobs_gpu_gives_the_card_from_the_runs_own_samples(tmp_path: Path) -> None:
    trace = JobTrace()
    for i in range(61):  # 60 s at 149 W, the energy counter rising 149 J a second
        sample = GpuSample(utilization_gpu_pct=100.0, vram_used_mib=6000.0, temperature_c=60.0, power_w=149.0,
                           energy_mj=1e6 + 149_000.0 * i, sm_clock_mhz=1935.0, clock_event_reasons=0x4)
        trace.add(snapshot(T0 + i, sample=sample, info=INFO, host=None))
    history = JobHistory(tmp_path / "h.sqlite")  # holds no sample at all: another process's GPU, say
    history.open()
    record = JobRecord(job_id=0, name="train.py", argv=("python3", "train.py"), started_s=T0, ended_s=T0 + 60.0,
                       exit_code=0, gpu_uuids=(INFO.uuid,), gpu_indices=(0,), source="simulated")
    run = SimpleNamespace(record=record, clock=lambda: T0 + 60.0, trace=trace, infos={0: INFO})
    try:
        card = job_card(run, config.Settings(), history, JobSeries(), "Held its speed.", throttled=False)  # type: ignore[arg-type]
    finally:
        history.close()
    assert len(card.gpus) == 1 and not any("No GPU samples" in n for n in card.notes)
    # 60 intervals of 149 J from the counter: 8,940 J = 2.483 Wh; mean power 149 W while running.
    assert card.energy_wh == pytest.approx(8940.0 / 3600.0)
    assert card.gpus[0].mean_power_w == pytest.approx(149.0)
    assert card.gpus[0].busy_share == pytest.approx(1.0) and card.throttled is False
    # The simulated GPU ran at full load because the job ran (a `sleep` too): the card says its figures are that.
    assert SIMULATED_LOAD_NOTE in card.notes
