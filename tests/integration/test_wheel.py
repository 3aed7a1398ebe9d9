"""The built wheel works on its own: installed into a fresh virtual environment, `rigscope` runs.

Dependencies (Qt, numpy, ...) are not downloaded again: the fresh environment sees the test
environment's site-packages through a plain path entry, which does not run that directory's
.pth files, so the editable install of this checkout stays invisible and ``desktop`` can only
come from the wheel. Commands run from a temporary directory so the source tree is not on
``sys.path`` either; the test asserts where the package was imported from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def run(command: list[str], cwd: Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s,
                            check=False)
    assert result.returncode == 0, f"{command}: {result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the sources (the build must not write into the shared checkout)."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("desktop", "advisor", "resources"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    # Build offline with this environment's setuptools when it has one (Python 3.12+ venvs
    # come without); otherwise pip fetches the build backend into an isolated environment.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--quiet",
         "--wheel-dir", str(out), str(src)], cwd=src)
    (built,) = out.glob("rigscope-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed (no pip inside: this one installs it)."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], cwd=env_dir.parent)
    python = env_dir / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=env_dir.parent).stdout.strip())
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", str(wheel)],
        cwd=env_dir.parent)
    return env_dir


def test_wheel_holds_every_package_and_the_resources(wheel: Path, repo_root: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "desktop/resources/gpu_profiles.toml" in names
    for init in [*repo_root.glob("desktop/**/__init__.py"), *repo_root.glob("advisor/**/__init__.py")]:
        assert init.relative_to(repo_root).as_posix() in names, f"{init.parent.name} missing: add it to pyproject"
    for source in repo_root.glob("resources/*"):
        if source.is_file():
            assert f"desktop/resources/{source.name}" in names


def test_installed_rigscope_runs_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    rigscope = venv / "bin" / "rigscope"
    assert run([str(rigscope), "--version"], cwd=tmp_path).stdout.strip().startswith("rigscope ")
    probe = "import desktop, desktop.paths as p; print(desktop.__file__); print(p.resource_path('gpu_profiles.toml'))"
    where = run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path).stdout.split()
    installed = venv.resolve()
    assert all(Path(path).resolve().is_relative_to(installed) for path in where), where
    assert Path(where[1]).is_file()


def test_installed_rigscope_doctor(venv: Path, tmp_path: Path) -> None:
    result = run([str(venv / "bin" / "rigscope"), "doctor", "--json"], cwd=tmp_path)
    report = json.loads(result.stdout)
    assert report["gpus"], result.stdout
    assert report["source"]["kind"] in ("nvml", "simulated")
    if report["source"]["kind"] == "simulated":  # no driver here: the fallback must say why
        assert report["fallback"], result.stdout
    text = run([str(venv / "bin" / "rigscope"), "doctor"], cwd=tmp_path).stdout
    assert "GPU 0" in text
