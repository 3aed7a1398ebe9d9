"""`rigscope run --price-per-hour X -o FILE`: the run record carries the machine's price, as `stress` does."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop import config
from desktop.stress.portable import read_record

pytestmark = pytest.mark.skipif(os.name != "posix", reason="runs a real job under POSIX process groups")
REPO = Path(__file__).resolve().parents[3]


def _rigscope(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desktop", "run", "--simulate", "--interval", "0.2", "--db", str(db),
                           *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)


def _euro_settings() -> None:
    settings = config.Settings()
    config.save(dataclasses.replace(settings, costs=dataclasses.replace(settings.costs, currency="EUR")))


def test_the_record_carries_the_price_per_hour_in_the_settings_currency(tmp_path: Path) -> None:
    _euro_settings()
    out = tmp_path / "job.json"
    done = _rigscope("--price-per-hour", "1.25", "-o", str(out), "--", sys.executable, "-c",
                     "import time; time.sleep(0.5)", db=tmp_path / "h.db")
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["kind"] == "job" and data["price_per_hour"] == 1.25 and data["currency"] == "EUR"
    record = read_record(out)  # what `rigscope compare` reads
    assert record.price_per_hour == 1.25 and record.currency == "EUR"


def test_without_a_price_the_record_has_none(tmp_path: Path) -> None:
    out = tmp_path / "job.json"
    done = _rigscope("-o", str(out), "--", sys.executable, "-c", "pass", db=tmp_path / "h.db")
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["price_per_hour"] is None and data["currency"] is None


@pytest.mark.parametrize(("args", "message"), [
    (["--price-per-hour", "-2", "-o", "x.json"], "--price-per-hour must be a price of zero or more"),
    (["--price-per-hour", "nan", "-o", "x.json"], "--price-per-hour must be a price of zero or more"),
    (["--price-per-hour", "2"], "--price-per-hour goes into the run record: add -o FILE"),
])
def test_a_bad_price_is_refused_before_the_job_starts(args: list[str], message: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = _rigscope(*args, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", db=tmp_path / "h.db")
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()
