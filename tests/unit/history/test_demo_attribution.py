"""The demo week is a shared workstation: `rigscope usage` and the weekly report's "Who used the GPU"
list its users, their command lines and the containerised inference server, from the real demo database."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

import pytest

from desktop import cli, config
from desktop.history.demo import write_demo
from desktop.history.store import HistoryStore
from desktop.report_week import load_week
from desktop.reporting import build_report, load_usage_rows
from desktop.telemetry.model import GpuProcess
from desktop.telemetry.scenarios import WeekScenario
from desktop.telemetry.simulated import parse_profile_list
from tests.unit.advisor.demo_db import DEMO_WEEK_END_S, stored_demo_week
from tests.unit.advisor.demo_frame import DEMO_WEEK_START_S
from tests.unit.history.helpers import FULL_SAMPLE, snapshot

USERS = {"dev", "ana", "sam"}
COMMANDS = {
    "python train.py --cfg llama.yaml",
    "python finetune_lora.py --base qwen2.5-7b --rank 16",
    "python train_recsys.py --emb-dim 256 --batch 64",
    "python -m ipykernel_launcher -f ~/.local/share/jupyter/runtime/kernel-5120.json",
    "python train_dataloader.py --workers 2",
    "llama-server -m qwen2.5-7b.gguf --port 8080",
    "python bench.py --quick",
}
CONTAINER = re.compile(r"^docker:llm-serve \([0-9a-f]{12}\)$")


def usage(capsys: pytest.CaptureFixture[str], by: str) -> dict[str, dict[str, float]]:
    assert cli.main(["usage", "--db", str(stored_demo_week()), "--by", by, "--json"], now_s=DEMO_WEEK_END_S) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by"] == by
    return {line["key"]: line for line in data["lines"]}


def test_every_episode_has_a_user_and_a_command_and_only_the_server_runs_in_a_container() -> None:
    scenario = WeekScenario([16376.0, 24564.0], seed=0)
    episodes = [e for plan in scenario._episodes for e in plan]
    assert {e.user for e in episodes} == USERS
    assert {e.command for e in episodes} >= COMMANDS
    assert {e.kind for e in episodes if e.container is not None} == {"serving"}
    for e in episodes:  # the command names the program the process list shows
        assert e.command is not None and e.process.removesuffix("_launcher") in e.command


def test_usage_by_user_command_and_container_on_the_demo_week(capsys: pytest.CaptureFixture[str]) -> None:
    by_user = usage(capsys, "user")
    assert set(by_user) == USERS  # nobody is "(unknown user)" or "demo"
    assert max(by_user, key=lambda k: by_user[k]["energy_wh"]) == "dev"  # the trainer uses most energy
    assert all(line["energy_wh"] > 0 and line["gpu_hours"] > 0 for line in by_user.values())

    by_command = usage(capsys, "command")
    assert set(by_command) == COMMANDS
    assert by_command["python -m ipykernel_launcher -f ~/.local/share/jupyter/runtime/kernel-5120.json"][
        "gpu_hours"] > 24  # Wednesday morning plus the forgotten night

    by_container = usage(capsys, "container")
    containers = [k for k in by_container if k != "(no container)"]
    assert len(containers) == 1 and CONTAINER.match(containers[0])
    assert by_container[containers[0]]["gpu_hours"] == pytest.approx(by_command[
        "llama-server -m qwen2.5-7b.gguf --port 8080"]["gpu_hours"])


def test_the_usage_table_for_people_names_no_unreadable_processes(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["usage", "--db", str(stored_demo_week()), "--by", "command"], now_s=DEMO_WEEK_END_S) == 0
    out = capsys.readouterr().out
    assert "llama-server -m qwen2.5-7b.gguf --port 8080" in out and "(unknown command)" not in out


def test_the_weekly_report_says_who_used_the_gpu() -> None:
    with HistoryStore.open(stored_demo_week(), readonly=True) as store:
        label, frame, previous, notes = load_week(store, "2026-W47", UTC, DEMO_WEEK_END_S + 86400)
        rows = load_usage_rows(store, frame)
    report = build_report(frame, previous, config.Settings(), UTC, label, now_s=DEMO_WEEK_END_S + 86400,
                          notes=notes, usage_rows=rows)
    by_user, by_command, by_container = report.who
    assert {line.key for line in by_user.lines} == USERS
    assert {line.key for line in by_command.lines} == COMMANDS
    assert any(CONTAINER.match(line.key) for line in by_container.lines)


def test_a_short_demo_history_stores_who_ran_what(tmp_path: Path) -> None:
    """Friday afternoon: the inference server, ana's, in its container; every process row has all three."""
    path = tmp_path / "demo.sqlite"
    friday_16h = DEMO_WEEK_START_S + 4 * 86400 + 16 * 3600
    write_demo(path, parse_profile_list("rtx4090-laptop"), days=0.02, seed=0, now_s=friday_16h)
    with HistoryStore.open(path, readonly=True) as store:
        rows = store.conn.execute("SELECT user_id, command_id, container_id FROM process_samples").fetchall()
        table = store.string_table()
    assert rows and all(None not in row for row in rows)
    assert {tuple(table[i] for i in row) for row in rows} == {
        ("ana", "llama-server -m qwen2.5-7b.gguf --port 8080", "docker:llm-serve (4f9c2a7d81b3)")}


# --- the "(unknown command)" note: commands not recorded are not blamed on unreadable processes ---------------

T0 = 1_790_000_040.0  # Mon 2026-09-21 14:14 UTC, ISO week 2026-W39
OLD = GpuProcess(pid=10, gpu_index=0, name="python3", user="ana", vram_mib=6000.0)  # as a pre-v8 row reads
NEW = dataclasses.replace(OLD, sm_util_pct=80.0, command="python train.py --cfg a.yaml")
HIDDEN = GpuProcess(pid=30, gpu_index=0, name="python3", user=None, vram_mib=1000.0, sm_util_pct=10.0)


def _history(tmp_path: Path, procs_at: Callable[[int], tuple[GpuProcess, ...]]) -> Path:
    """An hour at 200 W sampled every 2 s, processes polled every 10 s."""
    db = tmp_path / "h.sqlite"
    sample = dataclasses.replace(FULL_SAMPLE, power_w=200.0, energy_mj=None)
    with HistoryStore.open(db) as store:
        store.write_snapshots([snapshot(T0 + i, sample=sample, processes=() if i % 10 else procs_at(i))
                               for i in range(0, 3600, 2)])
    return db


def _report_html(db: Path) -> str:
    from desktop.ui.report.report_html import render_html

    with HistoryStore.open(db, readonly=True) as store:
        label, frame, previous, notes = load_week(store, "2026-W39", UTC, T0 + 7 * 86400)
        rows = load_usage_rows(store, frame)
    data = build_report(frame, previous, config.Settings(), UTC, label, now_s=T0 + 7 * 86400, notes=notes,
                        usage_rows=rows)
    return render_html(data, lambda key: "chart.png")


def _usage_text(db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["usage", "--db", str(db), "--by", "command", "--from", "-1h"], now_s=T0 + 3600) == 0
    return capsys.readouterr().out


def test_history_from_before_commands_were_recorded_says_so(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = _history(tmp_path, lambda i: (OLD,))
    for text in (_report_html(db), _usage_text(db, capsys)):
        assert "(unknown command)" in text
        assert "not recorded" in text and "could not read" not in text


def test_unreadable_processes_are_named_only_when_commands_were_being_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the first half hour from before the upgrade; then commands are recorded, but one process hides its own
    db = _history(tmp_path, lambda i: (OLD,) if i < 1800 else (NEW, HIDDEN))
    for text in (_report_html(db), _usage_text(db, capsys)):
        assert "not recorded" in text and "could not read" in text
    db2 = _history(tmp_path / "b", lambda i: (NEW, HIDDEN))
    for text in (_report_html(db2), _usage_text(db2, capsys)):
        assert "could not read" in text and "not recorded" not in text
