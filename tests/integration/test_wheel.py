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
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the package is built from (the build must not write into the shared checkout)."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("desktop", "advisor", "resources"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "packaging", src / "packaging", ignore=ignore)
    return src


@pytest.fixture(scope="module")
def wheel(src: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the sources."""
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


#: What a pipx user needs from the package beyond the code (issue 37): the menu entry and its metainfo, the unit
#: template `service install` fills in, and the Grafana dashboard.
PACKAGE_DATA = ("desktop/packaging/linux/rigscope.desktop",
                "desktop/packaging/linux/io.github.rigscope.Rigscope.metainfo.xml",
                "desktop/packaging/systemd/rigscope-recorder.service",
                "desktop/packaging/grafana/rigscope.json",
                "desktop/resources/rigscope.svg")


def test_wheel_holds_the_licence_and_the_packaging_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [name for name in PACKAGE_DATA if name not in names] == []
    licences = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert len(licences) == 1
    assert b"MIT License" in zipfile.ZipFile(wheel).read(licences[0])
    assert not any("pyinstaller" in name for name in names)  # built from a checkout only


def test_sdist_holds_the_licence_and_the_packaging_files(src: Path, tmp_path: Path) -> None:
    """The sdist (what pip builds a wheel from where it finds no wheel) has them too."""
    import tarfile

    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-isolation", "--skip-dependency-check"]
    run([sys.executable, "-m", "build", "--sdist", *isolation, "--outdir", str(tmp_path), str(src)], cwd=src)
    (sdist,) = tmp_path.glob("rigscope-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert "LICENSE" in names
    shipped = [name.replace("desktop/packaging/", "packaging/").replace("desktop/resources/", "resources/")
               for name in PACKAGE_DATA]
    assert [name for name in shipped if name not in names] == []


def test_menu_entry_installs_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    """`rigscope menu install` of the installed wheel (no checkout anywhere) fills an XDG tree and the entry runs
    the venv's own rigscope."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(venv / "bin" / "rigscope"), "menu", "install"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False, env={**env, "XDG_DATA_HOME": str(tmp_path / "share")})
    assert done.returncode == 0, done.stderr
    entry = (tmp_path / "share/applications/rigscope.desktop").read_text()
    assert f"Exec={venv / 'bin' / 'rigscope'}\n" in entry
    assert (tmp_path / "share/icons/hicolor/scalable/apps/rigscope.svg").is_file()
    assert (tmp_path / "share/metainfo/io.github.rigscope.Rigscope.metainfo.xml").is_file()


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
    assert report["source"]["kind"] in ("nvml", "unavailable")
    if report["source"]["kind"] == "unavailable":  # no driver here: the GPU is unavailable, and why
        assert report["fallback"]["reason"] and report["gpus"] == [], result.stdout
    else:
        assert report["gpus"], result.stdout
    text = run([str(venv / "bin" / "rigscope"), "doctor"], cwd=tmp_path).stdout
    assert "GPU 0" in text or "GPU UNAVAILABLE" in text
