"""Each limit the command line states is defined once: the option's help, the setting's default and range,
and the check that enforces it all read the same constant."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import advisor
import desktop
from advisor import guard
from desktop import cli, config

#: Limits and defaults that were written out in more than one module before (issue 23 item 4).
ONCE = ("MIN_GUARD_C", "MAX_STRESS_MINUTES", "MAX_MINUTES", "DEFAULT_LISTEN", "DEFAULT_BUSY_UTIL_PCT", "QUICK_S",
        "QUICK_MINUTES", "DEFAULT_GUARD_OFFSET_C", "DEFAULT_RESUME_OFFSET_C", "DEFAULT_MIN_PAUSE_S",
        "DEFAULT_MIN_RUN_S", "INTERVAL_RANGE_S")


def _assignments() -> dict[str, list[str]]:
    """Name -> the modules (under desktop/ and advisor/) that assign it at their top level."""
    found: dict[str, list[str]] = {}
    for package in (desktop, advisor):
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                    node, ast.AnnAssign) else []
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in ONCE:
                        found.setdefault(target.id, []).append(str(path.relative_to(root.parent)))
    return found


def test_each_limit_is_defined_in_one_module() -> None:
    found = _assignments()
    assert set(found) <= set(ONCE) and "MIN_GUARD_C" in found
    repeated = {name: modules for name, modules in found.items() if len(modules) > 1}
    assert repeated == {}


def test_the_settings_defaults_are_the_guards_defaults() -> None:
    jobs, stress = config.JobSettings(), config.StressSettings()
    job_guard = guard.GuardSettings(80.0)
    assert (jobs.guard_resume_offset_c, jobs.guard_min_pause_s, jobs.guard_min_run_s) == (
        job_guard.resume_offset_c, job_guard.min_pause_s, job_guard.min_run_s)
    assert stress.guard_offset_c == guard.DEFAULT_GUARD_OFFSET_C
    assert config.allowed_range("stress.default_minutes")[1] == config.MAX_STRESS_MINUTES


def _help(command: str) -> str:
    (action,) = (a for a in cli.build_parser()._actions if a.dest == "command")
    return " ".join(action.choices[command].format_help().split())  # type: ignore[index]


def test_the_help_states_the_limits_in_force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "DEFAULT_LISTEN", "127.0.0.1:19835")
    monkeypatch.setattr(config, "INTERVAL_RANGE_S", (0.25, 30.0))
    for command in ("serve", "record", "export"):
        text = _help(command)
        assert "(default 127.0.0.1:19835;" in text and "0.25 to 30 " in text, command
    assert f"it continues {config.JobSettings().guard_resume_offset_c:g} °C lower" in _help("run")
    assert f"default {config.StressSettings().default_minutes:g})" in _help("stress")
