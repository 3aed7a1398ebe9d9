"""The stress session on its own: the whole sequence (device, checks, locks, runner, earlier runs, verdict,
history, exit code) driven with the simulated GPU on an injected clock and plain callbacks, no Qt, no CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from desktop.errors import UserError
from desktop.history.store import HistoryStore
from desktop.sessions import stress_device as session_module
from desktop.sessions.gpu_locks import DeviceBusy, DeviceLock, gpu_lock
from desktop.sessions.stress import (
    EXIT_NOT_SAVED,
    StressRequest,
    StressSession,
    resolve_device,
)
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import Progress, SimClock, StressConfig
from desktop.stress.runner import StressRunner
from desktop.stress.runner_factory import runner_factory
from desktop.telemetry.model import GpuInfo
from desktop.telemetry.sampler import Sampler, open_gpu_backend
from desktop.telemetry.simulated import ManualLoad, SimulatedBackend, parse_profile_list
from tests.unit.stress.test_device_mapping import FakeCudaRunner, two_gpus


def _sim_runners(profiles: str = "rtx4090-laptop", seen: list[StressConfig] | None = None) -> Any:
    """The window's factory over a simulated machine, on one clock that jumps (a 10-minute test in under a second;
    a later run starts later)."""
    make = runner_factory(lambda: SimulatedBackend(parse_profile_list(profiles), ManualLoad(), seed=5),
                          clock=SimClock(real_s_per_s=0.0))

    def build(config: StressConfig) -> StressRunner:
        if seen is not None:
            seen.append(config)
        return make(config)

    return build


class Heard:
    """Every callback the session calls, in order."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.progress: list[Progress] = []
        self.started: list[tuple[GpuInfo | None, float | None]] = []
        self.warnings: list[str] = []

    def callbacks(self) -> dict[str, Any]:
        return {"on_phase": self.phases.append, "on_progress": self.progress.append,
                "on_start": lambda info, guard: self.started.append((info, guard)),
                "on_warning": self.warnings.append}


def test_a_sustained_run_is_judged_saved_and_the_next_compared_with_it(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    heard = Heard()
    runners = _sim_runners()
    session = StressSession(StressRequest(device="sim", duration_s=600.0, db_path=db), make_runner=runners,
                            lock_folder=tmp_path, **heard.callbacks())
    first = session.run()
    assert heard.phases == ["running", "judging", "saving", "done"]
    assert heard.progress and heard.progress[-1].elapsed_s >= 600.0 and heard.warnings == []
    (info, guard_c), = heard.started
    assert info is not None and info.index == 0 and guard_c == 90.0  # the laptop's 87 °C slowdown + 3
    assert first.verdict.throttled and first.verdict.cause_family == "thermal" and first.exit_code == 1
    assert first.run_id is not None and first.save_error is None and first.earlier == []
    with HistoryStore.open(db, readonly=True) as store:
        assert [r.run_id for r in store.stress_runs()] == [first.run_id]
    second = StressSession(StressRequest(device="sim", duration_s=600.0, db_path=db), make_runner=runners,
                           lock_folder=tmp_path).run()
    assert [r.run_id for r in second.earlier] == [first.run_id]
    assert "baseline" in second.verdict.comparison and second.run_id == first.run_id + 1


def test_the_users_regression_threshold_draws_the_baseline_line(tmp_path: Path) -> None:
    """The verdict's comparison uses the advisor's stress_regression_pct, not a default of its own."""
    db = tmp_path / "history.sqlite"
    runners = _sim_runners()
    request = StressRequest(device="sim", duration_s=600.0, db_path=db)
    StressSession(request, make_runner=runners, lock_folder=tmp_path).run()
    with HistoryStore.open(db) as store:  # the baseline run made 10 % faster: this run is 9 % below it
        [run] = store.stress_runs()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE stress_runs SET sustained_throughput = sustained_throughput * 1.1 WHERE run_id = ?",
                     (run.run_id,))
    strict = StressSession(request, make_runner=runners, lock_folder=tmp_path).run()
    assert "below your baseline" in strict.verdict.comparison, strict.verdict.comparison
    lenient = StressSession(request, make_runner=runners, lock_folder=tmp_path, regression_pct=15.0).run()
    assert "within" in lenient.verdict.comparison, lenient.verdict.comparison


def test_the_device_and_gpu_index_are_resolved_once_and_reach_the_runner_as_one_value(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[int] = []
    def counting_open() -> Any:
        opened.append(1)
        return open_gpu_backend()

    monkeypatch.setattr(session_module, "open_gpu_backend", counting_open)
    seen: list[StressConfig] = []
    session = StressSession(StressRequest(gpu_index=1, duration_s=30.0), make_runner=_sim_runners(
        "rtx4090-laptop,rtx4090", seen), lock_folder=tmp_path)
    # No NVIDIA GPU here: the default device is the simulated one, said once, with the GPU picked.
    assert session.device == GpuTarget("sim", 1, note=session.device.note) and session.device.note
    outcome = session.run()
    assert len(opened) == 1  # asked once, when the session was made; never again on the way to the runner
    (config,) = seen
    assert (config.device, config.gpu_index) == ("sim", 1)
    assert outcome.result.gpu is not None and outcome.result.gpu.index == 1 and "Laptop" not in outcome.result.gpu.name
    # CUDA: the picked GPU is the child's device (the runner asks CUDA for the PCI bus order).
    cuda = StressSession(StressRequest(device="cuda:0", gpu_index=1))
    assert cuda.device == GpuTarget("cuda", 1, 1) and cuda.config.device == "cuda:1"
    assert "cuda:1" in StressRunner(cuda.config).child_command()
    assert resolve_device("cuda:2") == GpuTarget.cuda(2) and resolve_device("cuda") == GpuTarget.cuda(0)
    assert resolve_device("cuda:2").name == "cuda:2" and resolve_device("cpu", 3) == GpuTarget("cpu", 3)


def test_the_session_holds_the_device_while_it_runs_and_refuses_a_busy_one(tmp_path: Path) -> None:
    during: list[bool] = []

    def probe(_progress: Progress) -> None:
        if not during:
            other = DeviceLock("sim", tmp_path)
            with pytest.raises(DeviceBusy):
                other.acquire()
            during.append(True)

    session = StressSession(StressRequest(device="sim", duration_s=10.0), make_runner=_sim_runners(),
                            lock_folder=tmp_path, on_progress=probe)
    session.run()
    assert during == [True]
    with DeviceLock("sim", tmp_path):  # released at the end
        built: list[StressConfig] = []
        busy = StressSession(StressRequest(device="sim", duration_s=10.0), make_runner=_sim_runners(seen=built),
                             lock_folder=tmp_path)
        with pytest.raises(DeviceBusy, match="already running on sim"):
            busy.run()
        assert built == []  # refused before any runner (or backend) was made
        # The window's simulated GPU is its own machine: no lock is taken on it there.
        StressSession(StressRequest(device="sim", duration_s=10.0), make_runner=_sim_runners(),
                      lock_folder=tmp_path, lock_simulated=False).run()


def test_a_gpu_another_run_holds_under_another_cuda_number_is_refused(tmp_path: Path) -> None:
    backend, gpus = two_gpus()
    held = gpu_lock(gpus[1].uuid, gpus[1].name, tmp_path)
    held.acquire()
    try:
        def fake_child(config: StressConfig) -> StressRunner:
            return FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 30.0,
                                  config=StressConfig(target=config.target, duration_s=30.0, interval_s=0.05),
                                  sampler=Sampler(backend), owns_sampler=True)

        session = StressSession(StressRequest(device="cuda:0", duration_s=30.0), make_runner=fake_child,
                                lock_folder=tmp_path)
        with pytest.raises(DeviceBusy, match="NVIDIA GeForce RTX 4090"):
            session.run()
    finally:
        held.release()
    with DeviceLock("cuda:0", tmp_path):  # the device lock went with the refused run
        pass


def test_a_history_that_cannot_be_read_or_written_keeps_the_verdict_and_says_why(tmp_path: Path) -> None:
    heard = Heard()
    folder = tmp_path / "not-a-database"
    folder.mkdir()
    outcome = StressSession(StressRequest(device="sim", duration_s=600.0, db_path=folder),
                            make_runner=_sim_runners(), lock_folder=tmp_path, **heard.callbacks()).run()
    assert outcome.verdict.throttled and outcome.run_id is None and outcome.earlier == []
    assert outcome.save_error and outcome.exit_code == EXIT_NOT_SAVED
    assert len(heard.warnings) == 1 and heard.warnings[0].startswith(f"cannot read earlier runs from {folder}: ")


def test_no_history_no_save_and_a_cancel_is_an_aborted_run(tmp_path: Path) -> None:
    session: StressSession

    def cancel_soon(progress: Progress) -> None:
        if progress.elapsed_s >= 20.0:
            session.cancel()

    session = StressSession(StressRequest(device="sim", duration_s=600.0), make_runner=_sim_runners(),
                            lock_folder=tmp_path, on_progress=cancel_soon)
    outcome = session.run()
    assert outcome.result.status == "cancelled" and outcome.verdict.status == "aborted" and outcome.exit_code == 4
    assert outcome.run_id is None and outcome.save_error is None and outcome.earlier == []


@pytest.mark.parametrize(("request_", "message"), [
    (StressRequest(device="sim", duration_s=-60.0), "positive number"),
    (StressRequest(device="sim", duration_s=1441 * 60.0), "beyond a day"),
    (StressRequest(device="sim", guard_c=20.0), "below room temperature"),
    (StressRequest(device="cpu", dtype="tf32"), "tf32 is a GPU precision"),
    (StressRequest(device="sim", workload="train"), "GEMM throughput only"),
])
def test_a_request_the_device_cannot_run_is_refused_before_any_runner(tmp_path: Path, request_: StressRequest,
                                                                      message: str) -> None:
    built: list[StressConfig] = []
    session = StressSession(request_, make_runner=_sim_runners(seen=built), lock_folder=tmp_path)
    with pytest.raises(UserError, match=message):
        session.run()
    assert built == []
    with pytest.raises(UserError, match="unknown device"):
        StressSession(StressRequest(device="tpu"))


def test_run_next_is_a_whole_test_again_on_a_new_runner_with_its_own_gpu_lock(tmp_path: Path) -> None:
    """`rigscope stress --per-mode`'s entry: each run a new runner, the GPU's lock held while it runs (and let go
    after it), the earlier runs read (the one before it too) and the run stored."""
    _backend, gpus = two_gpus()
    built: list[StressRunner] = []
    held_during: dict[int, bool] = {}

    def fake_child(config: StressConfig) -> StressRunner:
        backend, _gpus = two_gpus()
        runner = FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 0.5,
                                config=StressConfig(target=config.target, duration_s=0.5, interval_s=0.05),
                                sampler=Sampler(backend), owns_sampler=True)
        built.append(runner)
        return runner

    def probe(_progress: Progress) -> None:  # is this GPU's lock held while the run goes on?
        other = gpu_lock(gpus[1].uuid, gpus[1].name, tmp_path)
        try:
            other.acquire()
        except DeviceBusy:
            held_during[len(built)] = True
        else:
            other.release()

    db = tmp_path / "history.sqlite"
    session = StressSession(StressRequest(device="cuda:0", duration_s=30.0, db_path=db), make_runner=fake_child,
                            lock_folder=tmp_path, on_progress=probe)
    with session.device_lock():
        first = session.run_next()
        second = session.run_next()
    assert len(built) == 2 and built[0] is not built[1] and first.result is not second.result
    assert held_during == {1: True, 2: True}
    with gpu_lock(gpus[1].uuid, gpus[1].name, tmp_path), DeviceLock("cuda:0", tmp_path):
        pass  # both let go
    assert first.result.status == second.result.status == "completed"
    assert first.run_id is not None and second.run_id == first.run_id + 1
    assert first.earlier == [] and [r.run_id for r in second.earlier] == [first.run_id]


def test_run_next_compares_each_run_with_the_one_before(tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    seen: list[StressConfig] = []
    session = StressSession(StressRequest(device="sim", duration_s=600.0, db_path=db),
                            make_runner=_sim_runners(seen=seen), lock_folder=tmp_path)
    first = session.run_next()
    second = session.run_next()
    assert len(seen) == 2
    assert first.verdict.comparison in ("", None) and "baseline" in second.verdict.comparison
    assert second.run_id is not None and first.run_id is not None and second.run_id == first.run_id + 1
