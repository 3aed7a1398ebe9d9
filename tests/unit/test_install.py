"""The install (issue 26): `make run` installs the app and the stress extra only, the test tool
chain comes with `make test`, and the project metadata is the form setuptools no longer warns about."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _plan(target: str, venv: Path) -> str:
    """The commands `make TARGET` would run on a fresh clone (a .venv that does not exist yet)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "-C", str(REPO), target, f"VENV={venv}"], capture_output=True, text=True,
                          timeout=30, check=True)
    return done.stdout.replace(str(venv), "VENV")  # pytest's tmp_path says "pytest" too


def test_make_run_installs_the_app_and_the_stress_extra_only(tmp_path: Path) -> None:
    plan = _plan("run", tmp_path / "fresh-venv")
    assert '-e ".[stress]"' in plan
    assert "[test" not in plan and "pytest" not in plan


def test_make_test_installs_the_test_tool_chain_on_a_fresh_clone(tmp_path: Path) -> None:
    plan = _plan("test", tmp_path / "fresh-venv")
    app, tools, tests = (plan.index(step) for step in ('-e ".[stress]"', '-e ".[test,stress]"', "-m pytest"))
    assert app < tools < tests  # every install step is in the Makefile, before the tests run
    assert "python3 -m venv" in plan or "-m venv" in plan


def test_the_metadata_is_what_setuptools_wants() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert isinstance(project["project"]["license"], str)  # an SPDX expression, not the deprecated table
    assert not any(c.startswith("License ::") for c in project["project"].get("classifiers", ()))
    data = project["tool"]["setuptools"]["package-data"]
    packages = set(project["tool"]["setuptools"]["packages"])
    for package, patterns in data.items():
        # A pattern reaching into a subfolder that is no listed package: setuptools warns on every build.
        for pattern in patterns:
            if "/" in pattern:
                sub = pattern.split("/", 1)[0]
                assert sub == "**" and all(p.startswith(f"{package}.") for p in packages), pattern
