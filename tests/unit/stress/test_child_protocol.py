"""The workload child's protocol without torch: its command line both ways, the additions to its progress records,
and the sizes of its GEMM and bandwidth buffers (plain arithmetic, checked here without a child process)."""

from __future__ import annotations

import pytest

from desktop.stress.child_protocol import ReportAdditions, child_command, child_parser
from desktop.stress.devices import GpuTarget
from desktop.stress.result_check import Mismatch
from desktop.stress.run_model import StressConfig
from desktop.stress.shapes import MAX_BANDWIDTH_ELEMENTS, bandwidth_elements, gemm_edge

GIB = 1024**3


def test_the_child_parses_the_command_the_runner_builds() -> None:
    config = StressConfig(workload="infer", target=GpuTarget.cuda(0, 1), dtype="fp16", duration_s=90.0, size=2048,
                          threads=3, inject_faults=True)
    command = child_command(config, parent_pid=4321)
    assert command[1:3] == ["-m", "desktop.stress.workloads"]
    args = child_parser(("gemm", "infer"), ("fp16", "bf16")).parse_args(command[3:])
    assert (args.workload, args.device, args.dtype, args.seconds, args.size, args.threads, args.parent_pid,
            args.inject_faults) == ("infer", "cuda:1", "fp16", 90.0, 2048, 3, 4321, True)
    # Left at their defaults, the optional ones are not passed at all.
    assert child_command(StressConfig(target=GpuTarget("cpu")), 1)[3:] == [
        "--workload", "gemm", "--device", "cpu", "--seconds", "600.0", "--parent-pid", "1"]


class _Workload:
    def __init__(self) -> None:
        self.latencies_s: list[float] = []
        self.mismatch: Mismatch | None = None


def _count_ms(latencies_s: list[float]) -> dict[str, float]:
    return {"p50_ms": float(len(latencies_s))} if latencies_s else {}


def test_each_report_carries_its_own_latencies_and_a_mismatch_once() -> None:
    workload = _Workload()
    additions = ReportAdditions(workload, _count_ms)
    workload.latencies_s.extend([0.01, 0.02, 0.03])
    workload.mismatch = Mismatch(2, 64, 1, ((0, 0),))
    first: dict[str, object] = {"type": "progress"}
    additions(first)
    assert first["p50_ms"] == 3.0 and first["mismatch"] == {"elements": 2, "checked": 64, "tile_size": 128,
                                                             "tile_count": 1, "tiles": [[0, 0]]}
    assert workload.latencies_s == [] and workload.mismatch is None
    workload.latencies_s.append(0.04)
    second: dict[str, object] = {"type": "progress"}
    additions(second)
    assert second == {"type": "progress", "p50_ms": 1.0}  # this window's one step; the mismatch was said
    assert additions.run_latency() == {"p50_ms": 4.0}  # the done record: the whole run's


def test_gemm_size_fills_three_matrices_in_a_third_of_free_memory_within_gpu_burns_bounds() -> None:
    assert gemm_edge(80 * GIB, 2) == 8192  # an H100: capped
    assert gemm_edge(256 * 1024**2, 2) == 3584  # sqrt(256 MiB x 0.3 / 6 bytes) = 3663, down to a multiple of 256
    assert gemm_edge(16 * 1024**2, 4) == 1024  # almost nothing free: the floor


def test_bandwidth_buffers_take_a_quarter_of_free_memory_up_to_2_gib() -> None:
    assert bandwidth_elements(0, 4 * GIB) == 2**27  # 1 GiB over two int32 buffers
    assert bandwidth_elements(0, 80 * GIB) == 2**28  # capped at 2 GiB
    assert bandwidth_elements(0, None) == 16 * 1024 * 1024  # the CPU
    assert bandwidth_elements(1000, 80 * GIB) == 1000
    with pytest.raises(ValueError, match=f"1 to {MAX_BANDWIDTH_ELEMENTS} elements, not {2**31}"):
        bandwidth_elements(2**31, None)
