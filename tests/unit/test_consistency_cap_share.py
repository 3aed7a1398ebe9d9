"""The power cap of one run, as its job card and the Advisor say it on the demo week: one share of one busy time.

Issue 32: the demo's train_dataloader.py was "capped 55 % of the load" on its job card and "100 %" in the
Advisor; the two counted different things and neither said of what. Both now come from ``advisor.cap_share``
and say their denominator ("capped 100 % of its 6.6 busy hours"). Read back as data from what a user sees:

- "Advisor": `rigscope advise --json`, the power-cap card's "Capped in the worst run (NAME, of its N busy
  hours)" evidence, and its limit and mean power while capped;
- "jobs show": `rigscope jobs show ID` (the job card's "power cap" row); "Jobs page": the page's rows.

A failure names both pages and both figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.history.store import HistoryStore
from desktop.jobs.card import card_rows
from desktop.jobs.demo_jobs import write_demo_week
from desktop.sessions.jobs_reader import JobsHistory
from desktop.telemetry.simulated import parse_profile_list

#: A fixed end (2026-12-05 00:00 UTC): the week and its jobs are the same on any day.
NOW_S = 1_796_428_800.0
#: "capped 100 % of its 6.6 busy hours at its 150 W limit, mean 150 W while capped"
CARD_CAP = re.compile(r"^capped (\d+) % of its ([\d.]+) busy (seconds|minutes|hours)\b(?: at its (\d+) W limit)?"
                      r"(?:.*, mean (\d+) W while capped)?")
ADVISOR_WORST = re.compile(r"^Capped in the worst run \((.+), of its ([\d.]+) busy (seconds|minutes|hours)\)$")
PER_S = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("demo-cap-share")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RIGSCOPE_CONFIG_DIR", str(folder / "config"))
        patch.setenv("RIGSCOPE_DATA_DIR", str(folder / "data"))
        path = folder / "demo.sqlite"
        write_demo_week(path, parse_profile_list("rtx4090-laptop"), days=7, now_s=NOW_S)
        yield path


def _job_rows(demo: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str]]:
    """Each job's "power cap" row as `jobs show` and the Jobs page show it, by job name (the latest of a name)."""
    with HistoryStore.open(demo, readonly=True) as store:
        jobs = sorted(store.jobs(), key=lambda j: j.started_s)
    shown: dict[str, dict[str, str]] = {}
    history = JobsHistory(demo, config.Settings().costs, clock=lambda: NOW_S)
    for job in jobs:
        capsys.readouterr()
        assert cli.main(["jobs", "show", str(job.job_id), "--db", str(demo)], now_s=NOW_S) == 0
        text = capsys.readouterr().out
        printed = [line[2:].split(None, 2)[-1] for line in text.splitlines() if line.startswith("  power cap ")]
        page = [t for k, t in card_rows(history.detail(job.job_id).card) if k == "power cap"]
        shown[job.name] = {"jobs show": printed[0] if printed else "", "Jobs page": page[0] if page else ""}
    return shown


def test_a_run_is_capped_the_same_share_of_the_same_busy_time_on_its_card_and_in_the_advisor(
        demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["advise", "--db", str(demo), "--json"], now_s=NOW_S) == 0
    advice = json.loads(capsys.readouterr().out)
    [card] = [r for r in advice["recommendations"] if r["rule_id"] == "power_cap"]
    worst = [(m, e) for e in card["evidence"] if (m := ADVISOR_WORST.match(e["label"]))]
    assert worst, f"the power-cap card names no worst run: {[e['label'] for e in card['evidence']]}"
    (match, evidence), = worst
    name, busy_s = match.group(1), float(match.group(2)) * PER_S[match.group(3)]
    figures = {e["label"]: e["value"] for e in card["evidence"]}
    rows = _job_rows(demo, capsys)
    assert name in rows, f"Advisor: worst run {name!r} is no job on the Jobs page ({sorted(rows)})"
    for page, text in rows[name].items():
        shown = CARD_CAP.match(text)
        if shown is None:
            raise AssertionError(f"{page}: {name}'s power cap row {text!r} does not say its share of its busy time")
        share, card_busy_s = float(shown.group(1)), float(shown.group(2)) * PER_S[shown.group(3)]
        if abs(share - evidence["value"]) > 1.0:
            raise AssertionError(f"{page}: {name} capped {share:g} %, but Advisor: worst run capped "
                                 f"{evidence['value']:.1f} %")
        if abs(card_busy_s - busy_s) > 0.05 * busy_s:
            raise AssertionError(f"{page}: {name} of its {card_busy_s / 3600:.2f} busy hours, but Advisor: of its "
                                 f"{busy_s / 3600:.2f} busy hours")
        if shown.group(4) is None or float(shown.group(4)) != figures["Power limit"]:
            raise AssertionError(f"{page}: {name} at its {shown.group(4)} W limit, but Advisor: Power limit "
                                 f"{figures['Power limit']:g} W")
        if shown.group(5) is None or abs(float(shown.group(5)) - figures["Mean power while capped"]) > 1.0:
            raise AssertionError(f"{page}: {name} mean {shown.group(5)} W while capped, but Advisor: Mean power "
                                 f"while capped {figures['Mean power while capped']:.1f} W")


def test_every_cap_share_on_a_job_card_says_what_it_is_a_share_of(
        demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _job_rows(demo, capsys)
    capped = {name: r for name, r in rows.items() if r["jobs show"]}
    assert len(capped) >= 3, f"the demo's capped runs have a power cap row: {rows}"
    for name, pages in capped.items():
        for page, text in pages.items():
            assert CARD_CAP.match(text), f"{page}: {name}: {text!r}"


def test_the_data_loader_job_s_verdict_does_not_contradict_its_power_cap_row(tmp_path: Path) -> None:
    # Its card said "power cap active 55 % of the load at 95 W, 63 % of its 150 W power limit: another limit than
    # the board power" beside its own "capped 100 % of its 6.6 busy hours at its 150 W limit, mean 150 W while
    # capped": the verdict's level mixed the data-loader waits into the power while capped.
    from advisor.job_card import JobCard

    db = tmp_path / "demo.sqlite"
    assert cli.main(["demo", "--db", str(db), "--json"], now_s=NOW_S) == 0
    with HistoryStore.open(db, readonly=True) as store:
        (job,) = [j for j in store.jobs() if j.name == "train_dataloader.py"]
    card = JobCard.from_dict(job.card or {})
    assert "another limit" not in card.verdict and "at its 150 W power limit" in card.verdict, card.verdict
    assert "dense GEMM" not in card.verdict  # a training job's throughput, not a GEMM
