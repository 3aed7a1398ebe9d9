"""How the runner and the workload child talk: the child's command line, both sides, and its JSON lines.

The runner (desktop.stress.runner) starts ``python -m desktop.stress.workloads`` with the command
``child_command`` makes from the run's config; the child reads it back with ``child_parser`` and
answers one JSON object a line on stdout (``emit``; desktop.stress.child reads them): on CUDA first
``{"type": "device", "index", "count", "uuid", "pci_bus_id", ...}`` (the parent finds the NVML GPU to
watch from it), then ``{"type": "start", ...}``, ``{"type": "progress", "t", "throughput", "unit",
"errors", "checks", ...}`` about once a second (desktop.stress.pacing), ``{"type": "done", ...}`` or
``{"type": "error", "message"}``; ``ReportAdditions`` adds the step latencies and a check's mismatch
to the progress records. No torch here: the runner imports this module, and the child
passes in the names of its workloads and dtypes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desktop.stress.run_model import StressConfig

#: The module the child runs (``python -m``): the only one that imports torch.
WORKLOAD_MODULE = "desktop.stress.workloads"


def child_command(config: StressConfig, parent_pid: int) -> list[str]:
    """The child's command line for ``config``; ``parent_pid``: the child dies with that process."""
    command = [sys.executable, "-m", WORKLOAD_MODULE, "--workload", config.workload,
               "--device", config.device, "--seconds", str(config.duration_s), "--parent-pid", str(parent_pid)]
    if config.dtype:
        command += ["--dtype", config.dtype]
    if config.size:
        command += ["--size", str(config.size)]
    if config.threads:
        command += ["--threads", str(config.threads)]
    if config.inject_faults:
        command.append("--inject-faults")
    return command


def child_parser(workloads: Iterable[str], dtypes: Iterable[str]) -> argparse.ArgumentParser:
    """The child's side of ``child_command``: the parser for its arguments (``workloads``, ``dtypes``: the choices)."""
    parser = argparse.ArgumentParser(prog=f"python -m {WORKLOAD_MODULE}")
    parser.add_argument("--workload", choices=tuple(workloads), default="gemm")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=tuple(dtypes), default=None)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--size", type=int, default=0, help="GEMM N / bandwidth elements / block width (0 = auto)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0 = torch's default)")
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--inject-faults", action="store_true")
    return parser


def emit(record: dict[str, Any]) -> None:
    """One record to the parent: a JSON line on stdout, flushed at once."""
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class ReportAdditions:
    """What the child adds to each progress record (desktop.stress.pacing's ``on_report``), and to the done record.

    The step latencies since the last report as percentiles (``percentiles_ms``: the child's, computed by torch),
    kept for the whole run's percentiles (``run_latency``, in the done record); and the mismatch of the check that
    found wrong elements, reported once, with that check.
    """

    def __init__(self, workload: Any, percentiles_ms: Callable[[list[float]], dict[str, float]]) -> None:
        self.workload = workload
        self.percentiles_ms = percentiles_ms
        self.all_latencies_s: list[float] = []

    def __call__(self, record: dict[str, Any]) -> None:
        latencies = getattr(self.workload, "latencies_s", None)
        if latencies:
            record.update(self.percentiles_ms(latencies))
            self.all_latencies_s.extend(latencies)
            latencies.clear()
        mismatch = getattr(self.workload, "mismatch", None)
        if mismatch is not None:  # reported once, with the check that found it
            record["mismatch"] = mismatch.record()
            self.workload.mismatch = None

    def run_latency(self) -> dict[str, float]:
        """The whole run's step-latency percentiles (none for a workload without latencies)."""
        return self.percentiles_ms(self.all_latencies_s)
