"""The workloads' own correctness: an exact bandwidth check at any size, tf32 where claimed, native bf16 only.

torch stays out of the test process (as out of the GUI): what needs torch runs in a child.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from desktop.stress.devices import bf16_native, default_dtype

ROOT = Path(__file__).resolve().parents[3]
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")


def in_child(script: str, env: dict[str, str] | None = None) -> Any:
    """Run ``script`` (which prints one JSON value last) in a fresh interpreter; its value."""
    import os

    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, **(env or {})}, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_torch
def test_bandwidth_check_is_exact_at_2_to_the_28_elements() -> None:
    # 2^28 elements: a 1 GiB buffer, what a GPU with 4 GiB free gets. A float32 arange is
    # exact only to 2^24, so the old pattern failed thousands of the checked elements here.
    # The copy itself is left out (dst is src) to keep the test to one buffer.
    errors = in_child("""
        import json, torch
        torch.set_num_threads(2)
        from desktop.stress.workloads import Bandwidth
        bw = Bandwidth(torch.device("cpu"), "fp32", 2**28, False)
        bw.dst = bw.src
        print(json.dumps([bw.check() for _ in range(3)]))
    """)
    assert errors == [0, 0, 0]


@needs_torch
def test_bandwidth_still_counts_a_corrupted_element_and_a_moved_one() -> None:
    errors = in_child("""
        import json, torch
        from desktop.stress.workloads import Bandwidth
        bw = Bandwidth(torch.device("cpu"), "fp32", 1 << 20, True)
        bw.step()
        injected = bw.check()
        bw.inject = False
        bw.dst[-1] = bw.dst[-2]  # a copy that duplicated an element: the last ones are always checked
        print(json.dumps([injected, bw.check()]))
    """)
    assert errors == [1, 1]


@needs_torch
def test_every_workload_that_claims_tf32_turns_it_on_and_fp32_turns_it_off() -> None:
    flags = in_child("""
        import json, torch
        from desktop.stress.workloads import WORKLOADS
        out = {}
        for name, size in (("gemm", 64), ("bandwidth", 1024), ("train", 64), ("infer", 64)):
            for dtype in ("tf32", "fp32"):
                # Start each from the opposite setting: the flags are process-wide.
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = dtype != "tf32"
                WORKLOADS[name](torch.device("cpu"), dtype, size, False)
                out[f"{name}-{dtype}"] = [torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32]
        print(json.dumps(out))
    """)
    for name in ("train", "infer", "gemm"):
        assert flags[f"{name}-tf32"] == [True, True], name
        assert flags[f"{name}-fp32"] == [False, False], name


@pytest.mark.parametrize(("capability", "answers", "expected"), [
    ((8, 6), {"native": True, "emulated": True}, "bf16"),     # Ampere: bf16 in hardware
    ((9, 0), {"native": True, "emulated": True}, "bf16"),     # Hopper
    ((7, 5), {"native": False, "emulated": True}, "fp16"),    # Turing: bf16 only emulated
    ((6, 1), {"native": False, "emulated": False}, "fp16"),   # Pascal
])
def test_bf16_is_the_default_only_where_the_device_runs_it_natively(
        capability: tuple[int, int], answers: dict[str, bool], expected: str) -> None:
    def torch_2_3(including_emulation: bool = True) -> bool:
        return answers["emulated"] if including_emulation else answers["native"]

    def torch_2_1() -> bool:  # no argument; answers True for emulated bf16 too
        return answers["emulated"]

    assert default_dtype("cuda", bf16_native(torch_2_3, capability)) == expected
    assert default_dtype("cuda", bf16_native(torch_2_1, capability)) == expected
    assert default_dtype("cpu", bf16_native(torch_2_3, capability)) == "fp32"


@needs_torch
def test_the_default_dtype_asks_the_chosen_device_not_the_current_one() -> None:
    # Two GPUs: cuda:0 an Ampere (current), cuda:1 a Turing; the test runs on cuda:1.
    chosen = in_child("""
        import json, torch
        from desktop.stress import workloads
        current = [0]
        class Device:
            def __init__(self, device): self.index = torch.device(device).index
            def __enter__(self): self.prev, current[0] = current[0], self.index
            def __exit__(self, *exc): current[0] = self.prev
        torch.cuda.device = Device
        torch.cuda.get_device_capability = lambda d=None: {0: (8, 0), 1: (7, 5)}[torch.device(d).index]
        def is_bf16_supported(including_emulation=True):
            return torch.cuda.get_device_capability(torch.device("cuda", current[0]))[0] >= 8 or including_emulation
        torch.cuda.is_bf16_supported = is_bf16_supported
        print(json.dumps([workloads.default_dtype(torch.device("cuda:1")),
                          workloads.default_dtype(torch.device("cuda:0"))]))
    """)
    assert chosen == ["fp16", "bf16"]
