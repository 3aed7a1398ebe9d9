"""One guarded simulated job, rendered the four ways a user sees it, checked against itself and its raw samples.

The job runs under `rigscope run`'s own loop on the simulated GPU with a fast clock; the thermal guard
pauses it and continues it. Its figures are then read back as data from each place that shows them:

- "card": the card `rigscope run` printed on standard error;
- "jobs show": `rigscope jobs show ID` (its text) and `--json` (its card as data);
- "Jobs page": what the Jobs page shows (``JobsHistory.detail``'s card, as the page's rows);
- "record": the `-o` run record `rigscope compare` reads.

and checked: energy on the card = energy in the record (each at the precision it is shown), busy <= running
<= span, the guard's pauses out of busy time, throttling and throughput, "at its power limit" only where
the power the job drew while it ran is at >= 95 % of the limit. A failure names both pages and figures.
"""

from __future__ import annotations

import io
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from advisor.guard import GuardSettings
from desktop import cli, config
from desktop.history.store import HistoryStore
from desktop.jobs.card import card_rows, job_frame, job_gpus, pause_spans
from desktop.jobs.job import JobRun
from desktop.jobs.job_history import JobHistory
from desktop.sessions.jobs_reader import JobsHistory
from desktop.stress.portable import read_record
from desktop.telemetry.sampler import Sampler
from desktop.telemetry.simulated import SimulatedBackend, parse_profile_list

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the guard stops the job with SIGSTOP")

START_S = 1_800_000_000.0
#: The guard's limit: the simulated RTX 4090 Laptop GPU under the job's load passes it within a minute.
GUARD_C = 50.0
#: After the guard's first resume the job runs this long (simulated seconds), then ends by itself.
RUN_AFTER_RESUME_S = 40.0
AT_LIMIT_SHARE = 0.95
#: "at its 150 W power limit", "held at its power limit", "at the 150 W limit".
AT_LIMIT = re.compile(r"\bat (?:its|the) (?:[\d,.]+ W )?(?:power )?limit\b", re.IGNORECASE)

JOB = """
import json, os, sys, time
path, stop = os.environ["RIGSCOPE_PROGRESS"], sys.argv[1]
while not os.path.exists(stop):
    with open(path, "a") as f:
        f.write(json.dumps({"items": 8, "unit": "samples"}) + "\\n")
    time.sleep(0.005)
"""


class FastClock:
    """Simulated seconds that pass one per loop step, whatever the real time."""

    def __init__(self) -> None:
        self.now_s = START_S

    def __call__(self) -> float:
        return self.now_s


@dataclass
class Rendered:
    """The job as each place shows it."""

    db: Path
    job_id: int
    printed: str
    show_text: str
    show_json: dict[str, Any]
    record_path: Path


def _run_guarded_job(folder: Path) -> tuple[Path, int, str, Path]:
    from desktop.sessions.job import conclude

    clock = FastClock()
    db, output, stop = folder / "history.sqlite", folder / "job.json", folder / "stop"
    script = folder / "job.py"
    script.write_text(JOB)
    backend = SimulatedBackend(parse_profile_list("rtx4090-laptop"))
    sampler = Sampler(backend, clock=clock, monotonic=clock, process_period_s=5.0)
    history = JobHistory(db)
    history.open()
    out = (folder / "out").open("wb")
    run = JobRun([sys.executable, str(script), str(stop)], sampler, name="train.py", history=history,
                 guard=GuardSettings(GUARD_C, resume_offset_c=5.0, min_pause_s=20.0, min_run_s=20.0), clock=clock,
                 say=lambda _m: None, stdout_fd=out.fileno(), stderr_fd=out.fileno(), watchdog=False,
                 progress_path=folder / "progress.jsonl")

    def wait(_seconds: float) -> None:
        time.sleep(0.002)  # real time for the job to report between two simulated seconds
        clock.now_s += 1.0
        resumed = [e.time_s for e in run.events if e.kind == "resume"]
        if (resumed and clock.now_s - resumed[0] >= RUN_AFTER_RESUME_S) or clock.now_s - START_S > 1200:
            stop.touch()
            assert run.job is not None
            run.job.wait(0.05)

    run._wait = wait
    stderr = io.StringIO()
    try:
        run.start()
        progress = folder / "progress.jsonl"
        deadline = time.monotonic() + 30.0  # the clock starts once the job reports (a loaded machine starts it late)
        while not (progress.exists() and progress.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        run.run()
        conclude(run, config.Settings(), history, output, show_card=lambda card: print(card, file=stderr),
                 say=lambda message: print(f"rigscope run: {message}", file=stderr))
    finally:
        history.close()
        sampler.close()
        out.close()
    assert [e.kind for e in run.events][:2] == ["pause", "resume"], "the guard never paused the job"
    return db, run.record.job_id, stderr.getvalue(), output


@pytest.fixture(scope="module")
def guarded_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str, Path]]:
    folder = tmp_path_factory.mktemp("guarded-job")
    with pytest.MonkeyPatch.context() as patch:  # the module's run: private config and data folders too
        patch.setenv("RIGSCOPE_CONFIG_DIR", str(folder / "config"))
        patch.setenv("RIGSCOPE_DATA_DIR", str(folder / "data"))
        yield _run_guarded_job(folder)


def _render(guarded: tuple[Path, int, str, Path], capsys: pytest.CaptureFixture[str]) -> Rendered:
    db, job_id, printed, record_path = guarded
    capsys.readouterr()
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db)], now_s=START_S + 3600) == 0
    show_text = capsys.readouterr().out
    assert cli.main(["jobs", "show", str(job_id), "--db", str(db), "--json"], now_s=START_S + 3600) == 0
    show_json = json.loads(capsys.readouterr().out)
    return Rendered(db, job_id, printed, show_text, show_json, record_path)


# --- reading the figures back ------------------------------------------------------------------


def rows_of(text: str) -> list[tuple[str, str]]:
    """A printed card's (label, text) rows: each line is two spaces, the label padded to one width, two spaces."""
    lines = [line for line in text.splitlines() if line.startswith("  ") and line.strip()]
    first = lines[0]
    width = len(re.match(r"  (\S+\s+)", first).group(1)) - 2  # type: ignore[union-attr]
    return [(line[2:2 + width].strip(), line[4 + width:]) for line in lines]


def energy_wh_of(text: str) -> float:
    match = re.match(r"([\d,.]+) (k?Wh)", text)
    assert match, f"no energy in {text!r}"
    value = float(match.group(1).replace(",", ""))
    return value * 1000.0 if match.group(2) == "kWh" else value


def seconds_of(text: str) -> float:
    """ "1 min 05 s", "42 s", "2 h 01 min" (``duration_text``) in seconds."""
    total = 0.0
    for number, unit in re.findall(r"(\d+) (h|min|s)\b", text):
        total += float(number) * {"h": 3600.0, "min": 60.0, "s": 1.0}[unit]
    return total


def row(rows: list[tuple[str, str]], label: str) -> str:
    found = [text for key, text in rows if key == label]
    assert found, f"no {label!r} row in {rows}"
    return found[0]


def agree(page_a: str, figure_a: str, a: float, page_b: str, figure_b: str, b: float,  # noqa: PLR0917
          tol: float) -> None:
    """Fail naming both pages and both figures unless ``a`` and ``b`` agree within ``tol``."""
    if a is None or b is None or not abs(a - b) <= tol:
        raise AssertionError(f"{page_a}: {figure_a} = {a}, but {page_b}: {figure_b} = {b} (allowed {tol:g})")


def at_most(page_a: str, figure_a: str, a: float, page_b: str, figure_b: str, b: float) -> None:  # noqa: PLR0917
    if not a <= b + 1e-9:
        raise AssertionError(f"{page_a}: {figure_a} = {a:g} exceeds {page_b}: {figure_b} = {b:g}")


def check(rendered: Rendered, page_rows: list[tuple[str, str]]) -> None:
    """Every check of this module over one rendered job; AssertionError naming the pages and figures."""
    card = rendered.show_json["card"]
    record = read_record(rendered.record_path)
    printed = rows_of(rendered.printed)
    shown = rows_of(rendered.show_text)
    texts = {"card": printed, "jobs show": shown, "Jobs page": page_rows}

    # Energy: the record's joules are the card's watt-hours, at the precision each page prints them.
    record_wh = (record.energy_j or float("nan")) / 3600.0
    agree("jobs show --json", "energy_wh", card["energy_wh"], "record", "energy_j / 3600", record_wh, 1e-6)
    for page, rows in texts.items():
        text_wh = energy_wh_of(row(rows, "energy"))
        agree(page, "energy", text_wh, "record", "energy_j / 3600", record_wh, 0.006 * max(1.0, text_wh / 10.0))
    gpu = card["gpus"][0]
    agree("jobs show --json", "mean_power_w", gpu["mean_power_w"], "record", "power_w.mean",
          record.power_w.mean or float("nan"), 1e-6)
    agree("jobs show --json", "throughput_mean", card["throughput_mean"], "record", "throughput.sustained",
          record.throughput or float("nan"), 1e-9)
    if record.throttled is None or record.throttled != card["throttled"]:
        raise AssertionError(f"record: throttled = {record.throttled}, but jobs show --json: throttled = "
                             f"{card['throttled']}")

    # Busy time within the running time within the span; the guard's pauses are out of both.
    with HistoryStore.open(rendered.db, readonly=True) as store:
        stored = store.job(rendered.job_id)
        assert stored is not None
        series = store.job_series(rendered.job_id)
        frame = job_frame(store, stored, START_S + 3600)
    pauses = pause_spans(stored, card["ended_s"])
    paused_s = sum(b - a for a, b in pauses)
    agree("jobs show --json", "paused_s", card["paused_s"], "guard events", "sum of pauses", paused_s, 1e-6)
    agree("jobs show --json", "running_s", card["duration_s"] - card["paused_s"], "guard events",
          "span - pauses", card["duration_s"] - paused_s, 1e-6)
    at_most("jobs show --json", "busy_s", gpu["busy_s"], "jobs show --json", "running_s",
            card["duration_s"] - card["paused_s"])
    at_most("jobs show --json", "running_s", card["duration_s"] - card["paused_s"], "jobs show --json",
            "duration_s", card["duration_s"])
    for cause, seconds in gpu["throttle_s"].items():
        at_most("jobs show --json", f"throttle_s.{cause}", seconds or 0.0, "jobs show --json", "running_s",
                card["duration_s"] - card["paused_s"])
    for page, rows in texts.items():
        agree(page, "paused", seconds_of(row(rows, "paused")), "guard events", "sum of pauses", paused_s, 0.5)
        busy_pct = float(re.match(r"(\d+) %", row(rows, "GPU busy")).group(1))  # type: ignore[union-attr]
        at_most(page, "GPU busy %", busy_pct, page, "100 % of the running time", 100.0)
        agree(page, "GPU busy %", busy_pct, "jobs show --json", "busy_share x 100", gpu["busy_share"] * 100.0, 0.5)
    inside = np.zeros(len(series.time_s), dtype=bool)
    for a, b in pauses:
        inside |= (series.time_s >= a) & (series.time_s <= b)
    if np.isfinite(series.throughput[inside]).any():
        raise AssertionError("job series: a throughput while the guard held the job paused")

    # "At its power limit" only where the job drew >= 95 % of the limit while it ran (the raw samples).
    raw_power, limit = running_power(stored, frame, pauses, card["ended_s"])
    verdicts = {"card": row(printed, "verdict"), "jobs show": row(shown, "verdict"),
                "Jobs page": row(page_rows, "verdict"), "record": record.verdict_sentence}
    for page, sentence in verdicts.items():
        if AT_LIMIT.search(sentence) and raw_power < AT_LIMIT_SHARE * limit:
            raise AssertionError(f"{page}: verdict says {AT_LIMIT.search(sentence).group(0)!r}, but the raw "  # type: ignore[union-attr]
                                 f"samples: mean power while running = {raw_power:.1f} W < 95 % of {limit:g} W")

    # One object rendered: the printed card, `jobs show` and the Jobs page show the same rows.
    if printed != shown:
        raise AssertionError(f"card and jobs show differ: {set(printed) ^ set(shown)}")
    if printed[1:] != page_rows:
        raise AssertionError(f"card and Jobs page differ: {set(printed[1:]) ^ set(page_rows)}")


def running_power(stored: Any, frame: Any, pauses: Any, end_s: float) -> tuple[float, float]:
    """The mean power (W) of the job's GPU over its raw samples while it ran under load, and the GPU's limit."""
    samples = job_gpus(stored, frame)[0]
    running = (samples.time_s >= stored.started_s) & (samples.time_s < end_s)
    for a, b in pauses:
        running &= ~((samples.time_s >= a) & (samples.time_s < b))
    loaded = running & (np.nan_to_num(samples.utilization_gpu_pct) > 10.0) & np.isfinite(samples.power_w)
    mean = float(samples.power_w[loaded].mean()) if loaded.any() else 0.0
    return mean, samples.meta.power_limit_w or float("inf")


def _page_rows(rendered: Rendered) -> list[tuple[str, str]]:
    """The rows the Jobs page shows for the job (``JobsPage._show_detail``: the card's rows less its title)."""
    detail = JobsHistory(rendered.db, config.Settings().costs, clock=lambda: START_S + 3600).detail(rendered.job_id)
    return card_rows(detail.card)[1:]


# --- the tests ---------------------------------------------------------------------------------


def test_a_guarded_job_shows_the_same_figures_on_the_card_jobs_show_the_jobs_page_and_its_record(
        guarded_job: tuple[Path, int, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rendered = _render(guarded_job, capsys)
    card = rendered.show_json["card"]
    assert card["paused_s"] > 0 and card["pauses"] >= 1 and card["energy_wh"] > 0  # a real test of the pauses
    check(rendered, _page_rows(rendered))


def test_the_check_names_the_page_and_both_figures_when_one_renderer_is_off(
        guarded_job: tuple[Path, int, str, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = _render(guarded_job, capsys)
    rows = _page_rows(rendered)
    # The Jobs page rendering 10 % more energy than the card it was given.
    wrong = [(k, f"{energy_wh_of(t) * 1.1:.2f} Wh" if k == "energy" else t) for k, t in rows]
    with pytest.raises(AssertionError, match=r"Jobs page: energy = .*but record: energy_j / 3600"):
        check(rendered, wrong)
    # `jobs show --json` with a busy time longer than the running time.
    bad = json.loads(json.dumps(rendered.show_json))
    bad["card"]["gpus"][0]["busy_s"] = bad["card"]["duration_s"] + 1.0
    with pytest.raises(AssertionError, match=r"jobs show --json: busy_s = .* exceeds jobs show --json: running_s"):
        check(Rendered(**{**rendered.__dict__, "show_json": bad}), rows)
    # The demo's contradiction: "at its power limit" while the samples say 99 W of 150 W.
    module = sys.modules[__name__]
    with monkeypatch.context() as patch:
        patch.setattr(module, "running_power", lambda *_a: (99.0, 150.0))
        with pytest.raises(AssertionError, match=r"card: verdict says 'at its 150 W power limit'.*99.0 W < 95 % of "
                                                 r"150 W"):
            check(rendered, rows)
    # `rigscope jobs show` printing the card of a renderer that leaves the pauses in the energy's place.
    from desktop.jobs import card as job_card  # `rigscope jobs show` imports its renderer when it runs

    real = job_card.format_card
    monkeypatch.setattr(job_card, "format_card",
                        lambda c: real(type(c)(**{**c.__dict__, "energy_wh": c.energy_wh * 2})))
    with pytest.raises(AssertionError, match=r"jobs show: energy = .*but record: energy_j / 3600"):
        check(_render(guarded_job, capsys), rows)
