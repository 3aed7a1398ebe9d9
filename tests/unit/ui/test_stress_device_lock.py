"""The window's Stress page takes the same device lock as `rigscope stress`: one test per device, whether it
was started in the window or in a terminal (a second would measure the first's load)."""

from __future__ import annotations

from desktop.sessions.gpu_locks import DeviceLock
from desktop.sessions.stress import StressSession
from desktop.stress.devices import GpuTarget
from desktop.stress.run_model import StressConfig
from desktop.stress.runner import StressRunner
from desktop.ui.stress_work import StressWorker


def _worker(device: GpuTarget) -> tuple[StressWorker, list[str], list[object]]:
    runner = StressRunner(StressConfig(workload="gemm", target=device, duration_s=1.0, size=64, threads=1))
    worker = StressWorker(StressSession.for_runner(runner, lock_simulated=False))
    refused: list[str] = []
    done: list[object] = []
    worker.refused.connect(refused.append)
    worker.done.connect(done.append)
    return worker, refused, done


def test_a_test_already_running_on_the_device_in_a_terminal_is_refused_in_the_window(qtbot) -> None:
    held = DeviceLock("cpu")
    held.acquire()  # what `rigscope stress --device cpu` holds while it runs
    try:
        worker, refused, done = _worker(GpuTarget("cpu"))
        worker.start()
        qtbot.waitUntil(lambda: bool(refused or done), timeout=60_000)
        worker.wait(5000)
        assert done == [] and len(refused) == 1
        assert "cpu" in refused[0], refused[0]
    finally:
        held.release()


def test_the_window_holds_the_device_while_its_test_runs_and_lets_go_after(qtbot) -> None:
    worker, refused, done = _worker(GpuTarget("cpu"))
    during: list[bool] = []

    def probe(_progress: object) -> None:  # on the GUI thread, while the worker runs the test
        if not during:
            other = DeviceLock("cpu")
            try:
                other.acquire()
                during.append(False)
                other.release()
            except Exception:
                during.append(True)

    worker.progress.connect(probe)
    worker.start()
    qtbot.waitUntil(lambda: bool(refused or done), timeout=120_000)
    worker.wait(5000)
    assert refused == [] and len(done) == 1
    assert during == [True]  # a terminal's `rigscope stress --device cpu` would have been refused
    after = DeviceLock("cpu")
    after.acquire()  # released at the end
    after.release()


def test_the_window_refuses_a_gpu_a_terminal_loads_under_another_cuda_number(qtbot) -> None:
    from desktop.sessions.gpu_locks import gpu_lock
    from desktop.telemetry.sampler import Sampler
    from tests.unit.stress.test_device_mapping import FakeCudaRunner, two_gpus

    backend, gpus = two_gpus()
    held = gpu_lock(gpus[1].uuid, gpus[1].name)
    held.acquire()  # a terminal's run on the RTX 4090, which the window's cuda:0 turns out to be
    try:
        runner = FakeCudaRunner({"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}, 30.0,
                                config=StressConfig(target=GpuTarget.cuda(0), duration_s=30.0, interval_s=0.05),
                                sampler=Sampler(backend), owns_sampler=True)
        worker = StressWorker(StressSession.for_runner(runner, lock_simulated=False))
        refused: list[str] = []
        worker.refused.connect(refused.append)
        worker.start()
        qtbot.waitUntil(lambda: bool(refused), timeout=20_000)
        worker.wait(5000)
        assert "NVIDIA GeForce RTX 4090" in refused[0] and "already running" in refused[0]
    finally:
        held.release()


def test_the_window_refuses_a_child_on_another_gpu_than_the_one_picked(qtbot, monkeypatch) -> None:
    """Issue 35 item 3: the Stress page's picked GPU (NVML 0) goes down as one GpuTarget; the window's runner reads
    its UUID from the backend it opens, and a child that CUDA_VISIBLE_DEVICES=1 put on NVML GPU 1 is refused on the
    page instead of loading (and storing) a GPU the user did not pick."""
    import json
    import sys

    from desktop.stress.runner import StressRunner
    from desktop.stress.runner_factory import runner_factory
    from desktop.ui.pages.stress_page import StressPage
    from desktop.ui.theme import resolve
    from tests.unit.stress.test_device_mapping import FAKE_CHILD, RealLooking

    gpus = RealLooking().devices()
    child = {"index": 0, "count": 1, "uuid": gpus[1].uuid, "visible_devices": "1"}
    monkeypatch.setattr(StressRunner, "child_command",
                        lambda self: [sys.executable, "-c", FAKE_CHILD, json.dumps(child), "30"])
    page = StressPage(resolve("dark"), runner_factory(RealLooking), db_path=None, device="cuda",
                      gpus=[(g.index, g.name) for g in gpus])
    qtbot.addWidget(page)
    page.controls.gpu_combo.setCurrentIndex(0)
    page.controls.presets.button(0).setChecked(True)
    page.start()
    qtbot.waitUntil(lambda: not page.running, timeout=20_000)
    assert page.verdict_title.text() == "Cannot run the test"
    assert "not GPU 0 (cuda:0) that was picked" in page.verdict_text.text()
