"""`compare` of a CPU run and a GPU run says they are not comparable, not "0.00×" (issue 26)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from advisor.portable import Environment, PortableRecord, Spread
from advisor.run_compare import compare
from desktop.cli import main
from desktop.stress.portable import write_record


def _gpu() -> PortableRecord:
    return PortableRecord(
        kind="stress", workload="gemm", started_s=1_790_000_000.0, duration_s=600.0,
        environment=Environment(gpu_name="NVIDIA GeForce RTX 4090 Laptop GPU", driver="550.54.14", cuda_driver="12.4",
                                cuda_runtime="12.1", torch="2.3.1", rigscope="0.1.0", power_limit_w=150.0),
        machine="vector", device="cuda:0", dtype="bf16", unit="TFLOP/s", throughput=66.6, peak_throughput=72.3,
        power_w=Spread(140.0, 148.0, 150.0, 148.0), verdict="passed", throttled=False)


def _cpu() -> PortableRecord:
    gpu = _gpu()
    return replace(gpu, device="cpu", dtype="fp32", throughput=0.21, peak_throughput=0.23, power_w=Spread(),
                   environment=Environment(gpu_name="AMD Ryzen 9 7945HX", torch="2.3.1", rigscope="0.1.0"))


def test_a_cpu_and_a_gpu_run_are_not_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "cpu.json", tmp_path / "gpu.json"
    write_record(a, _cpu())
    write_record(b, _gpu())
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "a CPU and a GPU run: not comparable" in out
    assert re.search(r"\d×", out) is None and "Ratios (×)" not in out, out  # no ratio at all, not 0.00×
    assert "Differences that can explain a gap" not in out  # precision does not explain a CPU vs a GPU
    assert main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["comparable"] is False and "a CPU and a GPU run: not comparable" in data["notes"]
    assert all(r["throughput_ratio"] is None and r["work_per_joule_ratio"] is None for r in data["records"])
    assert not any(d["flagged"] for d in data["differences"])


def test_two_gpu_runs_and_two_cpu_runs_still_are() -> None:
    assert compare([_gpu(), replace(_gpu(), throughput=33.3)]).comparable
    cpus = compare([_cpu(), replace(_cpu(), throughput=0.42)])
    assert cpus.comparable and cpus.columns[1].throughput_ratio == pytest.approx(2.0)
    assert compare([_gpu(), replace(_gpu(), device="sim")]).comparable  # the simulated GPU is a GPU
