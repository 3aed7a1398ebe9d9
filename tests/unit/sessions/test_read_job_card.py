"""``read_job_card``: the one read of a recorded job's card, behind `rigscope jobs show` and the Jobs page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop import cli
from desktop.cli.common import load_settings
from desktop.history.store import HistoryStore
from desktop.sessions.job import read_job_card
from desktop.sessions.jobs_reader import JobsHistory
from tests.unit.cli.jobs_history import END, write_job_history

NOW_S = END + 60.0


def test_jobs_show_and_the_jobs_page_show_the_card_read_job_card_reads(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)  # no stored card: each front end builds it from the history
    costs = load_settings()[0].costs
    with HistoryStore.open(db, readonly=True) as store:
        read = read_job_card(store, job_id, costs, now_s=NOW_S)
    assert read is not None and read.frame is None and read.record.job_id == job_id
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db), "--json"], now_s=NOW_S) == 0
    shown = json.loads(capsys.readouterr().out)["card"]
    page = JobsHistory(db, costs, clock=lambda: NOW_S).detail(job_id)
    assert shown == json.loads(json.dumps(read.card.as_dict())) == json.loads(json.dumps(page.card.as_dict()))


def test_an_unknown_job_is_none_for_the_reader_a_clear_line_for_the_cli_and_a_lookup_error_for_the_page(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    with HistoryStore.open(db, readonly=True) as store:
        assert read_job_card(store, job_id + 1, load_settings()[0].costs, now_s=NOW_S, with_frame=True) is None
    assert cli.main(["jobs", "show", str(job_id + 1), "--db", str(db)], now_s=NOW_S) == 2
    assert f"no job {job_id + 1}" in capsys.readouterr().err
    with pytest.raises(LookupError, match=f"job {job_id + 1} is not in the history"):
        JobsHistory(db, load_settings()[0].costs, clock=lambda: NOW_S).detail(job_id + 1)


def test_a_stored_card_is_what_both_front_ends_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import dataclasses

    from tests.unit.cli.jobs_history import record

    db = tmp_path / "h.sqlite"
    job_id = write_job_history(db)
    costs = load_settings()[0].costs
    with HistoryStore.open(db) as store:
        read = read_job_card(store, job_id, costs, now_s=NOW_S)
        assert read is not None
        store.update_job(record(job_id=job_id, card=dataclasses.replace(read.card, verdict="stored verdict").as_dict()))
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db), "--json"], now_s=NOW_S) == 0
    assert json.loads(capsys.readouterr().out)["card"]["verdict"] == "stored verdict"
    page = JobsHistory(db, costs, clock=lambda: NOW_S).detail(job_id)
    assert page.card.verdict == "stored verdict" and page.gpus  # the stored card, and the charts from the history
