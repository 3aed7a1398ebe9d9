"""One simulated machine across processes (issue 32): the loads published in the runtime folder.

Real processes and real files: a child process (tests/unit/telemetry/sim_load_child.py) loads its simulated GPU
and publishes it; this process's simulated machine adds that load to its own and lists the child's process. A
file of a dead pid is ignored and removed; a garbage file, a huge one, a FIFO, a link and a pid-reused file cost
only themselves.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.telemetry.simulated import ManualLoad, SharedEntry, SharedLoads, SimulatedBackend, parse_profile_list
from desktop.telemetry.simulated.shared import MAX_FILE_BYTES, process_mark
from tests.waits import until

REPO = Path(__file__).resolve().parents[3]
CHILD = Path(__file__).with_name("sim_load_child.py")


def _folder() -> Path:
    return Path(os.environ["RIGSCOPE_RUNTIME_DIR"]) / "sim-loads"


def _machine() -> SimulatedBackend:
    return SimulatedBackend(parse_profile_list(None), shared=SharedLoads(min_period_s=0.0))


def _power_and_util(backend: SimulatedBackend, start_s: float, seconds: int) -> tuple[float, float]:
    """Advance the model ``seconds`` one second at a time; the last reading's power (W) and utilization (%)."""
    reading = None
    for step in range(1, seconds + 1):
        (reading,) = backend.sample(start_s + step)
    assert reading is not None and reading.sample is not None
    return float(reading.sample.power_w or 0.0), float(reading.sample.utilization_gpu_pct or 0.0)


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of another process of this user that runs for the whole test (it waits on its standard input)."""
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as proc:
        try:
            yield proc.pid
        finally:
            proc.communicate(timeout=60)


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _write(folder: Path, pid: int, loads: list[dict[str, object]], mark: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{pid}.json"
    path.write_text(json.dumps({"version": 1, "pid": pid, "mark": mark, "loads": loads}))
    return path


def _entry(pid: int, load: float = 1.0) -> dict[str, object]:
    return SharedEntry(0, pid, "other-job", load, 4096.0, "python other.py", None).as_json()


def test_a_load_published_by_another_process_is_this_machines_load(tmp_path: Path) -> None:
    """A real child process runs a job on its simulated GPU: this process's simulated GPU carries it (power at
    the limit, busy) and lists the child's process with its name and command; when the child stops the load,
    the file goes and the machine idles again. Before the registry: idle (about 10 W, 0 %) the whole time."""
    go = tmp_path / "stop"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with subprocess.Popen([sys.executable, str(CHILD), str(go)], env=env, stdout=subprocess.PIPE,
                          text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "loaded"  # the child published its load (and says so)
            backend = _machine()
            start = time.time()
            power, util = _power_and_util(backend, start, 30)
            limit = backend.devices()[0].power_limit_enforced_w
            assert limit is not None and power >= 0.9 * limit and util > 90.0, (power, util, limit)
            message = backend.end_process(child.pid)  # the window's End process: the simulator never signals it
            assert message is not None and "another process" in message and child.poll() is None
            procs = [p for p in backend.processes() if p.pid == child.pid]
            assert [(p.name, p.command, p.vram_mib) for p in procs] == [("sim-child", "sim-child --train", 3000.0)]
            assert procs[0].sm_util_pct == pytest.approx(util)  # its share of the GPU: all of it
            go.write_text("stop")  # the child stops its load: its file goes
            until(lambda: not (_folder() / f"{child.pid}.json").exists())
            power, util = _power_and_util(backend, start + 30, 30)
            assert util == 0.0 and power < 0.3 * limit, (power, util)
            assert not [p for p in backend.processes() if p.pid == child.pid]
        finally:
            go.write_text("stop")
            child.communicate(timeout=60)


def test_its_own_load_is_published_and_not_counted_twice() -> None:
    """This process's load is in its own file (the other processes read it) and not added to itself again."""
    backend = _machine()
    manual = backend.manual
    assert manual is not None
    manual.set(0, 0.5, vram_mib=2000.0, name="half", pid=4242, command="half --run")
    own = _folder() / f"{os.getpid()}.json"
    body = json.loads(own.read_text())
    assert body["pid"] == os.getpid() and [e["pid"] for e in body["loads"]] == [4242]
    assert stat.S_IMODE(_folder().stat().st_mode) == 0o700
    backend.sample(time.time())
    assert manual.demand(0, time.time()).load == pytest.approx(0.5)  # once, not 0.5 + 0.5
    manual.set(0, 0.0)
    assert not own.exists()  # no load: no file


def test_workloads_are_published_with_their_pattern() -> None:
    """The window's simulated workloads are shared too: another machine follows the inference server's bursts."""
    publisher = ManualLoad(shared=SharedLoads(min_period_s=0.0))
    publisher.start(0, "inference", 16384.0, started_s=0.0)
    body = json.loads((_folder() / f"{os.getpid()}.json").read_text())
    (entry,) = body["loads"]
    assert entry["workload"] == "inference" and entry["pid"] == 7300
    publisher.stop()
    assert not (_folder() / f"{os.getpid()}.json").exists()


def test_a_dead_processes_file_is_ignored_and_removed() -> None:
    """A process killed before it removed its file: its load is not counted, and its file is removed."""
    dead = _dead_pid()
    stale = _write(_folder(), dead, [_entry(dead)])
    backend = _machine()
    power, util = _power_and_util(backend, time.time(), 10)
    assert util == 0.0, (power, util)
    assert not stale.exists()


def test_a_reused_pid_is_not_the_process_that_published(live_pid: int) -> None:
    """A file whose pid now belongs to another process (its start mark differs) is stale too (Linux)."""
    here = process_mark(live_pid)
    if here is None:
        pytest.skip("no /proc here to tell a reused pid")
    path = _write(_folder(), live_pid, [_entry(live_pid)], mark=str(int(here) + 1))
    backend = _machine()
    _power, util = _power_and_util(backend, time.time(), 5)
    assert util == 0.0 and not path.exists()


def test_hostile_files_in_the_folder_cost_only_themselves(live_pid: int) -> None:
    """Garbage, a huge file, a FIFO, a link to /dev/zero, a wrong pid inside, bad numbers: each is skipped (none
    blocks, none fills memory), and the one valid entry among them is still read."""
    folder = _folder()
    folder.mkdir(parents=True, mode=0o700)
    parent = live_pid  # alive, not this process: its valid file is counted
    (folder / f"{parent + 100000}.json").write_bytes(b"\x00\xff{not json")
    (folder / "7.json").write_bytes(b" " * (MAX_FILE_BYTES * 64))
    os.mkfifo(folder / "8.json")
    (folder / "9.json").symlink_to("/dev/zero")
    _write(folder, 10, [_entry(10)]).rename(folder / "11.json")  # says pid 10 inside a file of pid 11
    (folder / "12.json").write_text(json.dumps({"version": 1, "pid": 12, "loads": [
        {"gpu": 0, "pid": 12, "name": "x", "load": float("nan"), "vram_mib": 1.0}, "nonsense", {"gpu": "0"}]}))
    (folder / "notes.txt").write_text("not a load file")
    _write(folder, parent, [_entry(parent, load=0.25)], mark=process_mark(parent))
    shared = SharedLoads(min_period_s=0.0)
    shared.refresh()
    assert [(e.pid, e.load) for e in shared.others] == [(parent, 0.25)]
    assert (folder / "8.json").exists() and (folder / "notes.txt").exists()  # not ours: left alone


def test_the_folder_is_read_at_most_once_per_period(live_pid: int) -> None:
    """Many model steps between two readings do not list the folder again: a new file shows from the next
    period on."""
    clock = [100.0]
    shared = SharedLoads(min_period_s=1.0, monotonic=lambda: clock[0])
    shared.refresh()
    parent = live_pid
    _write(_folder(), parent, [_entry(parent)], mark=process_mark(parent))
    clock[0] += 0.5
    shared.refresh()
    assert shared.others == ()
    clock[0] += 0.6
    shared.refresh()
    assert [e.pid for e in shared.others] == [parent]


def test_a_folder_others_can_write_is_neither_read_nor_written(live_pid: int) -> None:
    """Loads in a folder another user could write are not taken (nor is this process's load put there)."""
    folder = _folder()
    parent = live_pid
    _write(folder, parent, [_entry(parent)], mark=process_mark(parent))
    folder.chmod(0o777)
    shared = SharedLoads(min_period_s=0.0)
    shared.refresh()
    assert shared.others == ()
    shared.publish([SharedEntry(0, 1, "mine", 1.0, 1.0)])
    assert not (folder / f"{os.getpid()}.json").exists()
    folder.chmod(0o700)
    shared.refresh()
    assert [e.pid for e in shared.others] == [parent]


def test_two_machines_in_one_process_never_erase_each_others_load() -> None:
    """A stress run on a simulated machine of its own beside another in the same process: when one stops its
    load, the other's stays published (the process has one file for both)."""
    first, second = SharedLoads(), SharedLoads()
    first.publish([SharedEntry(0, 11, "first", 1.0, 100.0)])
    second.publish([SharedEntry(0, 22, "second", 0.5, 100.0)])
    own = _folder() / f"{os.getpid()}.json"
    assert sorted(e["pid"] for e in json.loads(own.read_text())["loads"]) == [11, 22]
    second.close()
    assert [e["pid"] for e in json.loads(own.read_text())["loads"]] == [11]
    first.close()
    assert not own.exists()


def test_what_the_commands_open_is_the_shared_machine() -> None:
    """`--simulate` (every command, the window) and `rigscope stress --device sim` open the shared machine."""
    from desktop.sessions.stress_device import own_runner
    from desktop.stress.devices import GpuTarget
    from desktop.stress.run_model import StressConfig
    from desktop.telemetry.sampler import open_gpu_backend

    backend = open_gpu_backend("")
    assert isinstance(backend, SimulatedBackend) and backend.manual is not None
    assert backend.manual.shared is not None
    runner = own_runner(StressConfig(target=GpuTarget("sim"), duration_s=1.0))
    try:
        assert runner.sampler is not None
        gpu = runner.sampler.gpu
        assert isinstance(gpu, SimulatedBackend) and gpu.manual is not None and gpu.manual.shared is not None
    finally:
        runner.sampler.close()


def test_on_windows_liveness_never_signals_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.kill(pid, 0) ends the process on Windows (TerminateProcess): there the pid is looked up instead
    (psutil, which asks OpenProcess there)."""
    from desktop.telemetry import host
    from desktop.telemetry.simulated import shared

    def no_signal(pid: int, sig: int) -> None:
        raise AssertionError(f"os.kill({pid}, {sig}) called")

    asked: list[int] = []
    monkeypatch.setattr(shared.os, "kill", no_signal)
    monkeypatch.setattr(host, "pid_running", lambda pid: asked.append(pid) or pid == 4242)
    monkeypatch.setattr(shared, "WINDOWS", True)
    alive_now, dead_now = shared.alive(4242, None), shared.alive(4343, None)
    monkeypatch.undo()
    assert (alive_now, dead_now, asked) == (True, False, [4242, 4343])
