"""Start the recorder at login: a systemd user unit on Linux, a logon task on Windows (`rigscope service`).

``install()``, ``uninstall()`` and ``status()`` are what the settings dialog's "start at login"
checkbox calls, and `rigscope service` (desktop/cli/service.py); ``install``/``uninstall`` raise
``UserError`` saying what to do when the change did not take effect (so the dialog keeps the
old value and shows why).
Every external command goes through a ``runner`` argument (``subprocess.run`` by default) so
tests check the commands without running them, and ``RIGSCOPE_SYSTEMD_USER_DIR`` overrides
where the unit file is written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from desktop.errors import PartlyDone, UserError
from desktop.paths import default_db_path, packaging_path

UNIT_NAME = "rigscope-recorder.service"
TASK_NAME = "Rigscope recorder"

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_command(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` capturing text output; a missing program is exit status 127, not an exception."""
    try:
        return subprocess.run(list(command), capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(list(command), 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(command), 124, "", f"{command[0]} did not answer within 30 s")


@dataclass(frozen=True)
class ServiceStatus:
    """Whether the recorder starts at login, as far as the platform's service manager can tell."""

    manager: str  # "systemd" | "schtasks"
    installed: bool
    #: None where the manager cannot be asked (no user systemd instance here).
    enabled: bool | None
    active: bool | None
    location: str
    command: list[str]
    detail: str = ""


@dataclass(frozen=True)
class ServiceResult:
    ok: bool
    message: str
    status: ServiceStatus


def recorder_command(frozen: bool | None = None, executable: str | None = None,
                     windows: bool = False, db_path: Path | None = None) -> list[str]:
    """The command line that runs the recorder with this very installation (venv, pipx or bundle),
    writing ``db_path`` when given (made absolute: the service starts in another folder)."""
    frozen = getattr(sys, "frozen", False) if frozen is None else frozen
    exe = executable or sys.executable
    db = ["--db", os.path.abspath(Path(db_path).expanduser())] if db_path is not None else []
    if frozen:  # a PyInstaller bundle: the executable is rigscope itself
        return [exe, "record", *db]
    if windows:  # pythonw: no console window flashing up at every logon
        pythonw = Path(exe).with_name("pythonw.exe")
        exe = str(pythonw) if pythonw.exists() else exe
    return [exe, "-m", "desktop", "record", *db]


def unsayable(word: str, executable: bool = False) -> str | None:
    """The character of ``word`` that a unit file (or a task's XML) cannot carry faithfully, named;
    None when there is none. A line break would start a new directive (``systemd-analyze verify``
    accepts the injected one); ``$$`` stays ``$$`` in the program's path, where systemd does no
    variable expansion (systemd 252: "Command /a$$b/python is not executable"); quotes and
    backslashes in that path are refused by systemd itself; bytes that are not UTF-8 cannot be
    written at all. An argument may hold quotes, backslashes, ``$`` and ``%``: they are escaped."""
    for char in word:
        if char == "\n":
            return r"a line break (\n)"
        if char == "\r":
            return r"a carriage return (\r)"
        if unicodedata.category(char) == "Cc":
            return f"a control character ({ascii(char)[1:-1]})"
        if unicodedata.category(char) == "Cs":
            return "bytes that are not valid UTF-8"
        if executable and char == "$":
            return "'$' (systemd would look for a program named with '$$')"
        if executable and char in "\\\"'":  # systemd: "Executable name contains special characters"
            return f"{char!r} (systemd refuses it in a program's path)"
    return None


def check_sayable(command: Sequence[str]) -> None:
    """UserError naming the word and the character when ``command`` cannot be written into a service."""
    for position, word in enumerate(command):
        problem = unsayable(word, executable=position == 0)
        if problem is not None:
            what = "the program" if position == 0 else "the argument"
            raise UserError(f"cannot make the recorder start at login: {what} {word!a} contains {problem}, "
                            "which a service definition cannot carry; install Rigscope (or put the database) "
                            "under a path without it")


# --- Linux: systemd user unit ----------------------------------------------------------


def _systemd_quote(arg: str) -> str:
    """One ExecStart word: specifiers (%) and variables ($) escaped, quoted when it has blanks.
    ``check_sayable`` has refused what cannot be quoted (control characters, ``$`` in the program)."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if any(c in arg for c in " \t\"'\\"):
        return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return arg


#: The shipped unit's ExecStart (packaging/systemd/rigscope-recorder.service): where pipx and
#: `pip install --user` put the command; %h is the user's home folder.
TEMPLATE_EXEC = "%h/.local/bin/rigscope record"


def render_unit(command: Sequence[str]) -> str:
    """The user unit's text: the shipped template (package data) with its ExecStart running ``command``;
    UserError when a word cannot be written into it."""
    check_sayable(command)
    template = packaging_path(f"systemd/{UNIT_NAME}").read_text(encoding="utf-8")
    exec_line = f"ExecStart={TEMPLATE_EXEC}\n"
    if template.count(exec_line) != 1:  # a broken installation: say so rather than write a unit without a command
        raise UserError(f"the shipped unit template {packaging_path(f'systemd/{UNIT_NAME}')} has no "
                        f"'ExecStart={TEMPLATE_EXEC}' line; reinstall Rigscope")
    return template.replace(exec_line, f"ExecStart={' '.join(_systemd_quote(a) for a in command)}\n")


def unit_dir() -> Path:
    override = os.environ.get("RIGSCOPE_SYSTEMD_USER_DIR")
    if override:
        return Path(override)
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "systemd" / "user"


def _systemctl_usable(runner: Runner) -> bool:
    """True when a user systemd instance answers (not in containers, SSH without lingering, WSL1)."""
    if shutil.which("systemctl") is None:
        return False
    return runner(["systemctl", "--user", "show-environment"]).returncode == 0


def _manual_hint(action: str) -> str:
    return f"systemctl --user daemon-reload && systemctl --user {action} --now {UNIT_NAME}"


def unit_command(text: str) -> list[str] | None:
    """The command an installed unit runs (its ExecStart, unquoted as ``render_unit`` quoted it), None without one."""
    for line in text.splitlines():
        if line.startswith("ExecStart="):
            try:
                words = shlex.split(line.removeprefix("ExecStart="))
            except ValueError:  # edited by hand into something unbalanced
                return None
            return [w.replace("%%", "%").replace("$$", "$") for w in words]
    return None


def recorded_db(command: Sequence[str]) -> str | None:
    """The history database a recorder command writes (its ``--db``), None for the default."""
    words = list(command)
    if "--db" in words[:-1]:
        return words[words.index("--db") + 1]
    return None


def _linux_status(runner: Runner) -> ServiceStatus:
    path = unit_dir() / UNIT_NAME
    installed = path.exists()
    command = recorder_command()
    if installed:  # what is installed, not what an install would write now (its --db above all)
        try:
            command = unit_command(path.read_text(encoding="utf-8")) or command
        except (OSError, UnicodeDecodeError):
            pass
    if not _systemctl_usable(runner):
        return ServiceStatus("systemd", installed, None, None, str(path), command,
                             "systemctl --user is not available here")
    enabled = runner(["systemctl", "--user", "is-enabled", UNIT_NAME]).returncode == 0
    active = runner(["systemctl", "--user", "is-active", UNIT_NAME]).returncode == 0
    return ServiceStatus("systemd", installed, enabled, active, str(path), command)


def _linux_install(runner: Runner, db_path: Path) -> ServiceResult:
    path = unit_dir() / UNIT_NAME
    text = render_unit(recorder_command(db_path=db_path))  # refuses before anything is written
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the systemd unit {path}: {exc.strerror or exc}") from exc
    if not _systemctl_usable(runner):  # written but not enabled: starting at login is not in effect yet
        return ServiceResult(False, f"Wrote {path}, but systemctl --user is not available here; in your desktop "
                             f"session run: {_manual_hint('enable')}", _linux_status(runner))
    runner(["systemctl", "--user", "daemon-reload"])
    done = runner(["systemctl", "--user", "enable", "--now", UNIT_NAME])
    if done.returncode != 0:
        return ServiceResult(False, f"Wrote {path}, but enabling it failed: {done.stderr.strip()}",
                             _linux_status(runner))
    return ServiceResult(True, f"Installed {path}; the recorder runs now and at every login "
                         f"(logs: journalctl --user -u {UNIT_NAME}).", _linux_status(runner))


def _linux_uninstall(runner: Runner) -> ServiceResult:
    path = unit_dir() / UNIT_NAME
    usable = _systemctl_usable(runner)
    if usable:
        runner(["systemctl", "--user", "disable", "--now", UNIT_NAME])  # fails harmlessly when not loaded
    existed = path.exists()
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise UserError(f"cannot remove {path}: {exc.strerror or exc}") from exc
    if usable:
        runner(["systemctl", "--user", "daemon-reload"])
        message = f"Removed {path}; the recorder no longer starts at login." if existed else "Nothing was installed."
    else:
        message = (f"Removed {path}. systemctl --user is not available here; if the recorder runs, stop it in "
                   f"your desktop session: systemctl --user disable --now {UNIT_NAME}")
    return ServiceResult(True, message, _linux_status(runner))


# --- Windows: a logon task ---------------------------------------------------------------


def windows_user() -> str:
    """``DOMAIN\\user`` of whoever runs this (the logon trigger and the task's principal)."""
    user = os.environ.get("USERNAME") or os.environ.get("USER") or "user"
    domain = os.environ.get("USERDOMAIN")
    return f"{domain}\\{user}" if domain else user


def task_xml(command: Sequence[str], user: str) -> str:
    """The logon task's definition. Written as XML rather than with ``/SC ONLOGON`` because that
    triggers at *any* user's logon (administrators only), stops the task after 72 hours and
    does not start it on battery; this one is the user's own, unlimited, on battery too."""
    exe, args = escape(command[0]), escape(subprocess.list2cmdline(list(command[1:])))
    who = escape(user)
    return f"""<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo><Description>Rigscope GPU telemetry recorder</Description></RegistrationInfo>
  <Triggers><LogonTrigger><Enabled>true</Enabled><UserId>{who}</UserId></LogonTrigger></Triggers>
  <Principals>
    <Principal id="Author"><UserId>{who}</UserId><LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel></Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <Enabled>true</Enabled>
  </Settings>
  <Actions Context="Author"><Exec><Command>{exe}</Command><Arguments>{args}</Arguments></Exec></Actions>
</Task>
"""


def schtasks_create_command(xml_path: Path) -> list[str]:
    return ["schtasks", "/Create", "/TN", TASK_NAME, "/XML", str(xml_path), "/F"]


def schtasks_delete_command() -> list[str]:
    return ["schtasks", "/Delete", "/TN", TASK_NAME, "/F"]


def schtasks_query_command() -> list[str]:
    return ["schtasks", "/Query", "/TN", TASK_NAME, "/FO", "LIST", "/V"]


def _windows_status(runner: Runner) -> ServiceStatus:
    command = recorder_command(windows=True)
    query = runner(schtasks_query_command())
    if query.returncode != 0:
        return ServiceStatus("schtasks", False, False, False, TASK_NAME, command)
    text = query.stdout
    return ServiceStatus("schtasks", True, "Disabled" not in text, "Running" in text, TASK_NAME, command)


def _windows_install(runner: Runner, db_path: Path) -> ServiceResult:
    command = recorder_command(windows=True, db_path=db_path)
    check_sayable(command)  # XML 1.0 cannot carry control characters either
    with tempfile.TemporaryDirectory(prefix="rigscope-task-") as tmp:
        xml_path = Path(tmp) / "task.xml"
        xml_path.write_text(task_xml(command, windows_user()), encoding="utf-16")  # what schtasks /XML reads
        done = runner(schtasks_create_command(xml_path))
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        hint = " (creating a logon task may need an elevated prompt once; see docs/windows.md)" \
            if "denied" in detail.lower() else ""
        return ServiceResult(False, f"Creating the logon task failed: {detail}{hint}", _windows_status(runner))
    runner(["schtasks", "/Run", "/TN", TASK_NAME])  # start recording now, not only at the next logon
    return ServiceResult(True, f"Created the logon task {TASK_NAME!r}; the recorder runs now and at every logon.",
                         _windows_status(runner))


def _windows_uninstall(runner: Runner) -> ServiceResult:
    runner(["schtasks", "/End", "/TN", TASK_NAME])
    done = runner(schtasks_delete_command())
    message = f"Removed the logon task {TASK_NAME!r}." if done.returncode == 0 else "Nothing was installed."
    return ServiceResult(True, message, _windows_status(runner))


# --- the API the CLI and the settings dialog use -------------------------------------------


def _platform(system: str | None) -> str:
    system = system or sys.platform
    if system.startswith("linux"):
        return "linux"
    if system.startswith("win"):
        return "windows"
    raise UserError(f"starting the recorder at login is supported on Linux (systemd) and Windows, not {system}")


def install(runner: Runner | None = None, system: str | None = None, db_path: Path | None = None) -> ServiceResult:
    """Make the recorder start at login (and now); UserError, saying what to do, where that did not happen.

    The service records to ``db_path`` (default: the data folder as this process sees it), written
    into the service as an absolute ``--db``: the service manager's environment may lack the
    RIGSCOPE_DATA_DIR or XDG_DATA_HOME of the shell that installed it."""
    run = runner or run_command
    db = Path(db_path).expanduser() if db_path is not None else default_db_path()
    result = _linux_install(run, db) if _platform(system) == "linux" else _windows_install(run, db)
    if not result.ok and result.status.installed:  # written (the unit), not in effect: a step is left to the user
        raise PartlyDone(result.message)
    if not result.ok:
        raise UserError(result.message)
    return result


def uninstall(runner: Runner | None = None, system: str | None = None) -> ServiceResult:
    """Stop starting the recorder at login (and stop it)."""
    run = runner or run_command
    result = _linux_uninstall(run) if _platform(system) == "linux" else _windows_uninstall(run)
    if not result.ok:
        raise UserError(result.message)
    return result


def summary(state: ServiceStatus) -> str:
    """One line of what ``rigscope service status`` says: installed or not, where, at login, running, why unknown."""

    def word(flag: bool | None) -> str:
        return "unknown" if flag is None else ("yes" if flag else "no")

    text = (f"{'installed' if state.installed else 'not installed'} ({state.manager}: {state.location}); "
            f"starts at login: {word(state.enabled)}; running: {word(state.active)}")
    return f"{text} ({state.detail})" if state.detail else text


def status(runner: Runner | None = None, system: str | None = None) -> ServiceStatus:
    run = runner or run_command
    return _linux_status(run) if _platform(system) == "linux" else _windows_status(run)
