"""A stored job's card weighs it against the limit in force while it ran, not the GPU's last one (issue 32).

The laptop's job ran held at its then-enforced 80 W; Dynamic Boost raised the limit to 175 W after it. Before,
the card took ``GpuMeta.power_limit_w`` (175 W, the last read) for its verdict and its ``power_limit_w``: "power
cap active 100 % of the load at 79 W, 45 % of its 175 W power limit: another limit than the board power".
"""

from __future__ import annotations

from pathlib import Path

from advisor.progress import JobSeries
from desktop.config import CostSettings
from desktop.history.store import HistoryStore
from desktop.jobs.card import build_card, card_rows, job_frame
from desktop.jobs.model import JobRecord
from tests.unit.cli.test_analyze_stored_limit import LAPTOP, T0, _history


def test_a_job_at_its_then_enforced_80_w_is_weighed_against_80_w(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    _history(db)  # 600 s at 79 W under the SW power cap at 80 W, then idle at 175 W
    record = JobRecord(job_id=1, name="train.py", argv=("python", "train.py"), started_s=T0, ended_s=T0 + 600,
                       exit_code=0, gpu_uuids=(LAPTOP.uuid,), gpu_indices=(0,))
    with HistoryStore.open(db, readonly=True) as store:
        frame = job_frame(store, record, T0 + 900)
    assert frame.gpus[0].meta.power_limit_w == 175.0  # the last limit read
    card = build_card(record, JobSeries(), frame, CostSettings(), now_s=T0 + 900)
    assert card.gpus[0].power_limit_w == 80.0
    assert "175 W" not in card.verdict and "another limit than the board power" not in card.verdict
    assert "at its 80 W power limit" in card.verdict
    [cap] = [text for label, text in card_rows(card) if label == "power cap"]
    assert cap == "capped 100 % of its 10 busy minutes at its 80 W limit, mean 79 W while capped"
