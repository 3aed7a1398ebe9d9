"""The Jobs page on a real history database: list newest first, the card, the charts with pauses shaded."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QApplication, QTableWidget

from desktop.config import CostSettings
from desktop.jobs.detail import MIN_CHART_BINS, binned, chart_bins
from desktop.sessions.jobs_reader import JobsHistory
from desktop.ui.pages.jobs_page import JobsPage
from desktop.ui.theme import DARK, LIGHT
from tests.unit.cli.jobs_history import END, PAUSE, START, record, write_job_history


def _page(qtbot: Any, db: Path) -> JobsPage:
    page = JobsPage(JobsHistory(db, CostSettings(electricity_price_per_kwh=0.30, currency="EUR"),
                                clock=lambda: END + 60.0), DARK)
    qtbot.addWidget(page)
    page.resize(1400, 900)
    page.show()
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading and page.detail is not None, timeout=20_000)
    return page


def _text(table: QTableWidget, row: int, col: int) -> str:
    item = table.item(row, col)
    assert item is not None
    return item.text()


def _shot(page: JobsPage, name: str) -> None:
    """Where RIGSCOPE_SHOTS names a folder, keep a picture of the page to look at."""
    folder = os.environ.get("RIGSCOPE_SHOTS")
    if folder:
        page.grab().save(str(Path(folder) / name))


def test_the_list_is_newest_first_and_the_newest_card_is_shown(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    first = write_job_history(db)
    second = write_job_history(db, job=record(name="later.py", started_s=START + 1.0, events=(), paused_s=0.0))
    page = _page(qtbot, db)
    assert page.stack.currentIndex() == 1 and "2 jobs recorded" in page.status.text()
    assert [_text(page.table, r, 0) for r in range(page.table.rowCount())] == [str(second), str(first)]
    assert page.detail is not None and page.detail.record.job_id == second
    page.table.selectRow(1)
    qtbot.waitUntil(lambda: page.detail is not None and page.detail.record.job_id == first, timeout=20_000)
    assert page.title.text() == f"Job #{first}: train.py"
    cells = {_text(page.card_table, r, 0): _text(page.card_table, r, 1) for r in range(page.card_table.rowCount())}
    assert cells["GPU busy"] == "92 % of the running time, mean utilization 92 %"
    assert cells["paused"].startswith("by the guard 30 s (1 time)")
    assert cells["energy"].startswith("6.67 Wh, 0.002 EUR")
    assert "USD" in cells["in the cloud"]
    _shot(page, "jobs-dark.png")


def test_the_charts_cover_the_job_with_its_pause_shaded(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    write_job_history(db)
    page = _page(qtbot, db)
    times, values = page.charts.plot("throughput").data("job")
    # 10 it/s throughout, with a gap where the guard stopped the job (no line across the pause).
    assert len(times) > 20 and np.all(values[np.isfinite(values)] == 10.0)
    assert list(times[~np.isfinite(values)]) == [PAUSE[0]]
    assert page.pause_note.isVisible()
    assert page.charts.plot("throughput").unit == "it/s"
    util_t, util = page.charts.plot("utilization_gpu_pct").data("gpu0")
    assert util_t[0] == START and util_t[-1] <= END and np.nanmax(util) == 100.0
    regions = [r for _item, r in page._pause_regions]
    assert len(regions) == 4 and all(r.getRegion() == PAUSE for r in regions)
    assert all(isinstance(r, pg.LinearRegionItem) for r in regions)
    (x0, x1), _ = page.charts.plot("power_w").item.viewRange()
    assert (x0, x1) == (START, END)
    page.apply_theme(LIGHT)  # the card and the shading are drawn again in the light theme
    assert len(page._pause_regions) == 4
    _shot(page, "jobs-light.png")


def test_long_jobs_are_drawn_as_means_of_equal_stretches() -> None:
    time_s = np.arange(0.0, 2000.0)
    values = np.where(time_s % 2 == 0, 0.0, 10.0)  # noise that a min/max envelope would paint solid
    values[:100] = np.nan  # no readings: a gap stays a gap
    times, means = binned(time_s, values, 0.0, 2000.0, bins=100)
    assert len(times) == 100 and times[0] == 10.0 and np.isnan(means[:5]).all()
    assert np.allclose(means[5:], 5.0)
    assert binned(time_s[:50], values[:50], 0.0, 50.0, bins=100)[0] is not None  # short: as it is


def test_a_short_duty_cycle_reads_as_a_flat_band_not_a_moire() -> None:
    """The demo week's data-starved job: 12 h at 1 Hz, 20 s busy (100 %) and 20 s waiting (10 %). Plain means
    of 144 s stretches beat against the 40 s cycle (10 points apart); weighting each with half of its
    neighbours' samples leaves a band about one point thick at the mean."""
    time_s = np.arange(0.0, 12 * 3600.0)
    values = np.where(time_s % 40.0 < 20.0, 100.0, 10.0)
    _times, means = binned(time_s, values, 0.0, 12 * 3600.0, bins=300)
    assert np.ptp(means[1:-1]) < 2.0  # the first and last stretch have one neighbour: a plain mean's spread
    assert abs(float(np.mean(means)) - 55.0) < 0.5 and np.ptp(means) < 10.0


def test_a_long_job_gets_one_chart_point_per_few_pixels(tmp_path: Path) -> None:
    """Means over stretches about 3 px wide, from the chart's own width: a fixed 800 bins put more than one
    point on each pixel of a 900 px chart, and a job's 40 s duty cycle aliased into a moire."""
    assert chart_bins(900.0) == 300 and chart_bins(3000.0) == 1000
    assert chart_bins(0.0) == MIN_CHART_BINS  # a chart not laid out yet still gets a readable picture
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    source = JobsHistory(db, CostSettings(), clock=lambda: END + 60.0)
    narrow = source.detail(job_id, bins=40)  # 160 samples of 1 Hz telemetry, 40 stretches of 4 s
    assert [len(trace.time_s) for trace in narrow.gpus] == [40]
    assert narrow.gpus[0].time_s[0] == START + 2.0
    wide = source.detail(job_id, bins=400)  # more stretches than samples: the samples as they are
    assert len(wide.gpus[0].time_s) == 161  # START to END at 1 Hz


def test_copy_card_puts_the_text_on_the_clipboard(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    write_job_history(db)
    page = _page(qtbot, db)
    page.copy_card()
    text = QApplication.clipboard().text()
    assert "python train.py --epochs 3" in text and "VRAM peak" in text


def test_no_jobs_explains_how_to_record_one(qtbot: Any, tmp_path: Path) -> None:
    page = JobsPage(JobsHistory(tmp_path / "none.sqlite", CostSettings()), DARK)
    qtbot.addWidget(page)
    page.page_shown()
    qtbot.waitUntil(lambda: not page.loading, timeout=20_000)
    assert page.stack.currentWidget() is page.empty
    assert "rigscope run -- python train.py" in page.empty.text()
    page.resize(1000, 600)
    page.show()
    _shot(page, "jobs-empty.png")


def test_a_much_wider_page_reads_the_job_again_with_more_chart_points(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    write_job_history(db)
    page = _page(qtbot, db)
    narrow = page.bins
    page.resize(2800, 900)  # the charts more than double in width
    qtbot.waitUntil(lambda: page.bins > narrow * 1.25 and not page.loading, timeout=20_000)
    assert page.detail is not None and page.bins == page._chart_bins()
    wide = page.bins
    page.resize(2860, 900)  # a few pixels more: not worth reading the job again
    assert not page._rebin.isActive()
    qtbot.wait(400)  # a "nothing happens" check: no re-read is scheduled, so none may start in 0.4 s
    assert page.bins == wide


def test_a_job_of_a_few_seconds_shows_an_empty_state_not_four_empty_charts(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    write_job_history(db, job=record(name="quick.py", started_s=START + 10.0, ended_s=START + 15.0, events=(),
                                     paused_s=0.0))
    page = _page(qtbot, db)
    assert not page.charts.isVisibleTo(page)
    assert page.charts_empty.isVisibleTo(page)
    assert "5 s" in page.charts_empty.text() and "too short" in page.charts_empty.text()
    _shot(page, "jobs-short.png")


def test_the_id_header_is_not_clipped(qtbot: Any, tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    write_job_history(db)
    page = _page(qtbot, db)
    header = page.table.horizontalHeader()
    needed = header.fontMetrics().horizontalAdvance("ID")
    assert header.sectionSize(0) >= needed + 8
