"""The stress workloads (torch kernels), run in a child process that reports by JSON lines on stdout.

Run as ``python -m desktop.stress.workloads --workload gemm --device cpu --seconds 60``.
This is the only module that imports torch, and only the child process imports it: a CUDA
fault or a hang cannot take the window down. Its command line and its records (one JSON object
a line: device, start, progress about once a second, done or error) are desktop.stress.child_protocol's.
Each workload checks its whole result periodically, as gpu-burn does (desktop.stress.result_check:
every element against the first result of the same computation, plus a float64 reference of a
corner), counts mismatching elements as errors and names the output tiles they fall in (the
progress record's ``mismatch``). ``--inject-faults`` (or the environment variable
RIGSCOPE_STRESS_INJECT_FAULT=1) corrupts one element at a random place before every check, so
tests can prove that errors are reported.
"""

from __future__ import annotations

import copy
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from desktop.stress.child_protocol import ReportAdditions, child_parser, emit
from desktop.stress.devices import CudaIdentity, bf16_native, cuda_index_problem, nvml_uuid, pci_bus_id
from desktop.stress.devices import default_dtype as choose_dtype
from desktop.stress.lifeline import die_with_parent
from desktop.stress.pacing import Fence, drive, no_fence
from desktop.stress.result_check import TOLERANCE, Mismatch, corrupt_one, mismatch_mask, summarize
from desktop.stress.shapes import bandwidth_elements, block_shape, gemm_edge

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}


def default_dtype(device: torch.device) -> str:
    """bf16 where the device runs it natively, else fp16 (on CUDA); fp32 on the CPU."""
    if device.type != "cuda":
        return choose_dtype(device.type, False)
    with torch.cuda.device(device):  # is_bf16_supported asks the current device
        native = bf16_native(torch.cuda.is_bf16_supported, torch.cuda.get_device_capability(device))
    return choose_dtype(device.type, native)


def configure_precision(dtype: str) -> None:
    """TF32 tensor cores for fp32 matmuls and convolutions exactly when the run says tf32.

    Every workload calls this: the flags are process-wide, torch leaves matmul TF32 off and
    cuDNN TF32 on by default, so without it "tf32" ran plain fp32 and "fp32" convolutions ran TF32.
    """
    tf32 = dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def cuda_identity(device: torch.device) -> CudaIdentity:
    """Who ``device`` is, for the parent to find it in NVML: CUDA's count, the UUID and the PCI address."""
    index = device.index if device.index is not None else 0
    count = torch.cuda.device_count()
    identity = CudaIdentity(index=index, count=count, visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"))
    if cuda_index_problem(index, count) is not None:
        return identity
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)  # torch 2.1+: "a1b2c3d4-..." without NVML's "GPU-"
    bus = [getattr(props, key, None) for key in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    numbers = [v for v in bus if isinstance(v, int)]
    address = pci_bus_id(*numbers) if len(numbers) == 3 else None
    return CudaIdentity(index=index, count=count, uuid=nvml_uuid(uuid) if uuid is not None else None,
                        pci_bus_id=address,
                        name=str(getattr(props, "name", "")) or None, visible_devices=identity.visible_devices)


class _CudaEvent:
    def __init__(self, device: torch.device) -> None:
        # A blocking event sleeps until the GPU reaches it instead of spinning a CPU core: on a
        # laptop the CPU shares the GPU's cooling.
        self._event = torch.cuda.Event(blocking=True)  # type: ignore[no-untyped-call]
        self._event.record(torch.cuda.current_stream(device))

    def wait(self) -> None:
        self._event.synchronize()


def fence_for(device: torch.device) -> Callable[[], Fence]:
    if device.type == "cuda":
        return lambda: _CudaEvent(device)
    return no_fence


def check_supported(dtype: str, device: torch.device) -> None:
    if dtype == "tf32" and (device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 8):
        raise ValueError("tf32 needs an NVIDIA GPU of the Ampere generation or newer")
    if dtype == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError("this GPU does not support bf16")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gemm_size(device: torch.device, dtype: str, requested: int = 0) -> int:
    """Square GEMM size: from free memory on a GPU (capped at 8192, as gpu-burn), small on the CPU."""
    if requested:
        return requested
    if device.type != "cuda":
        return 512
    free_b, _total = torch.cuda.mem_get_info(device)
    return gemm_edge(free_b, torch.tensor([], dtype=_DTYPES[dtype]).element_size())


class Gemm:
    """Square matrix multiply, C = A @ B, throughput in TFLOP/s."""

    unit = "TFLOP/s"

    def __init__(self, device: torch.device, dtype: str, size: int, inject: bool) -> None:
        configure_precision(dtype)
        self.device, self.dtype, self.n, self.inject = device, dtype, size, inject
        gen = torch.Generator(device="cpu").manual_seed(0)
        # Scaled so each element of C is about N(0, 1): the tolerance then means the same at every size.
        scale = size ** -0.25
        self.a = (torch.randn(size, size, generator=gen) * scale).to(device=device, dtype=_DTYPES[dtype])
        self.b = (torch.randn(size, size, generator=gen) * scale).to(device=device, dtype=_DTYPES[dtype])
        self.c = torch.empty(size, size, device=device, dtype=_DTYPES[dtype])
        self.work_per_step = 2.0 * size ** 3 / 1e12
        #: C of the first check: every later C (same inputs, same kernel) must equal it element for element.
        self.first: torch.Tensor | None = None
        #: The last check that found wrong elements (the progress record reports it once).
        self.mismatch: Mismatch | None = None
        self.rng = random.Random()

    def describe(self) -> dict[str, Any]:
        return {"shape": [self.n, self.n, self.n]}

    def step(self) -> None:
        torch.matmul(self.a, self.b, out=self.c)

    def check(self) -> int:
        """Wrong elements of C: all N x N against the first check's C, and a 32 x 256 corner against float64.

        The whole-matrix comparison is a few element-wise passes (milliseconds at N = 8192, one more
        N x N buffer); the float64 corner is a few hundred MFLOP, so checking every two seconds costs
        well under 1 % even where float64 is slow (GeForce). An element wrong in both counts once.
        """
        if self.first is None:
            self.first = self.c.clone()
        if self.inject:
            corrupt_one(self.c, self.rng)
        bad = mismatch_mask(self.c, self.first, TOLERANCE[self.dtype])
        rows, cols = min(32, self.n), min(256, self.n)
        reference = self.a[:rows].double() @ self.b[:, :cols].double()
        bad[:rows, :cols] |= mismatch_mask(self.c[:rows, :cols], reference, TOLERANCE[self.dtype])
        found = summarize(bad)
        if found.elements:
            self.mismatch = found
        return found.elements


class Bandwidth:
    """Device-memory copy, dst <- src, throughput in GB/s (read + write bytes).

    Element i of the source holds i as an int32: a copy that drops, duplicates or moves an
    element shows at any size. (A float32 ``arange`` is exact only up to 2^24 = 16 Mi
    elements, so on any GPU with more than ~512 MiB free the old check failed healthy hardware.)
    """

    unit = "GB/s"

    def __init__(self, device: torch.device, dtype: str, size: int, inject: bool) -> None:
        free_b = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" and not size else None
        count = bandwidth_elements(size, free_b)
        self.device, self.inject = device, inject
        self.src = torch.arange(count, dtype=torch.int32, device=device)
        self.dst = torch.empty_like(self.src)
        self.work_per_step = 2.0 * count * self.src.element_size() / 1e9

    def describe(self) -> dict[str, Any]:
        return {"bytes": int(self.src.numel() * self.src.element_size())}

    def step(self) -> None:
        self.dst.copy_(self.src)

    def check(self) -> int:
        count = self.src.numel()
        # Random elements, and the last ones, where an inexact pattern would fail first; each element
        # once (a random pick of a last one, or of the same element twice, would count its error twice).
        idx = torch.unique(torch.cat([torch.randint(0, count, (4096,)), torch.arange(max(0, count - 64), count)]))
        got = self.dst[idx.to(self.device)].cpu().to(torch.int64)
        if self.inject:
            got[0] += 1
        return int((got != idx).sum())


def _gpu_shape(device: torch.device, size: int, *, train: bool) -> tuple[int, int, int]:
    if device.type != "cuda":
        return block_shape(None, None, train=train, width=size)
    free_b, _total = torch.cuda.mem_get_info(device)
    sms = int(torch.cuda.get_device_properties(device).multi_processor_count)
    return block_shape(sms, int(free_b), train=train, width=size)


def _block(width: int) -> torch.nn.Module:
    return torch.nn.TransformerEncoderLayer(d_model=width, nhead=max(1, width // 64), dim_feedforward=4 * width,
                                            dropout=0.0, batch_first=True)


class _BlockWorkload:
    """Shared by train and infer: a transformer block sized to the GPU (``block_shape``) and its float64 check."""

    unit = "steps/s"
    work_per_step = 1.0
    #: Copying the block for the float64 reference is not free: check less often than a GEMM.
    check_period_s = 5.0

    def __init__(self, device: torch.device, dtype: str, size: int, inject: bool, *, train: bool) -> None:
        configure_precision(dtype)
        width, self.seq, batch = _gpu_shape(device, size, train=train)
        torch.manual_seed(0)
        self.device, self.dtype, self.inject, self.width = device, dtype, inject, width
        self.model = _block(width).to(device)
        self.x = torch.randn(batch, self.seq, width, device=device)
        self.autocast = dtype in ("bf16", "fp16")
        self.latencies_s: list[float] = []
        self.train = train
        #: Infer's weights never change: its whole output at the first check is what every later one must be.
        self.first: torch.Tensor | None = None
        self.mismatch: Mismatch | None = None
        self.rng = random.Random()

    def describe(self) -> dict[str, Any]:
        return {"width": self.width, "seq": self.seq, "batch": int(self.x.shape[0])}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.autocast:
            with torch.autocast(device_type=self.device.type, dtype=_DTYPES[self.dtype]):
                result: torch.Tensor = self.model(x)
                return result
        out: torch.Tensor = self.model(x)
        return out

    def check(self) -> int:
        """Wrong elements of the whole batch's output, plus those of 8 tokens against the same weights in float64.

        The whole output is compared with the first check's (infer: fixed weights) or with the same
        forward pass run again (train: the weights move each step); the float64 reference says the
        computation itself is right.
        """
        was_training = self.model.training
        self.model.eval()
        tolerance = TOLERANCE[self.dtype] * (4.0 if self.autocast else 10.0)
        with torch.no_grad():
            full = self.forward(self.x)
            if self.train or self.first is None:
                expected = self.forward(self.x) if self.train else full.clone()
                if not self.train:
                    self.first = expected
            else:
                expected = self.first
            if self.inject:
                corrupt_one(full, self.rng)
            found = summarize(mismatch_mask(full, expected, tolerance))
            x = self.x[:1, :8]
            # The same weights in float64 on the same device (no host copy of the model).
            reference_model = copy.deepcopy(self.model).double()
            reference = reference_model(x.double())
            del reference_model
            # Attention over 8 tokens is another computation than over the batch's: counted on its own.
            wrong_small = int(mismatch_mask(self.forward(x), reference, tolerance).sum())
        self.model.train(was_training)
        if found.elements:
            self.mismatch = found
        return found.elements + wrong_small


class Train(_BlockWorkload):
    """Forward, backward and an AdamW step of one transformer block; steps/s."""

    def __init__(self, device: torch.device, dtype: str, size: int, inject: bool) -> None:
        super().__init__(device, dtype, size, inject, train=True)
        self.target = torch.randn_like(self.x)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)

    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(self.forward(self.x).float(), self.target)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()


class Infer(_BlockWorkload):
    """Small-batch forward passes (batch 1 up to ~64 tokens per SM); steps/s plus p50/p95/p99 step latency."""

    def __init__(self, device: torch.device, dtype: str, size: int, inject: bool) -> None:
        super().__init__(device, dtype, size, inject, train=False)
        self.model.eval()

    def step(self) -> None:
        started = time.perf_counter()
        with torch.no_grad():
            self.forward(self.x)
        synchronize(self.device)
        self.latencies_s.append(time.perf_counter() - started)


WORKLOADS: dict[str, Callable[[torch.device, str, int, bool], Any]] = {
    "gemm": Gemm, "bandwidth": Bandwidth, "train": Train, "infer": Infer,
}


def latency_percentiles_ms(latencies_s: list[float]) -> dict[str, float]:
    if not latencies_s:
        return {}
    values = torch.tensor(latencies_s, dtype=torch.float64) * 1000.0
    q = torch.quantile(values, torch.tensor([0.5, 0.95, 0.99], dtype=torch.float64))
    return {"p50_ms": float(q[0]), "p95_ms": float(q[1]), "p99_ms": float(q[2])}


def run(workload_name: str, device_name: str, dtype: str | None, seconds: float, *, size: int = 0,
        inject: bool = False, check_period_s: float = 2.0) -> int:
    device = torch.device(device_name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            emit({"type": "error", "message": "CUDA is not available to torch in this environment"})
            return 2
        # First the device's identity: the parent watches the NVML GPU it names (CUDA's order
        # and CUDA_VISIBLE_DEVICES are not NVML's), and refuses when it cannot find one.
        identity = cuda_identity(device)
        emit(identity.as_record())
        problem = cuda_index_problem(identity.index, identity.count, identity.visible_devices)
        if problem:
            emit({"type": "error", "message": problem})
            return 2
        device = torch.device("cuda", identity.index)
        torch.cuda.set_device(device)  # torch's device-less queries (is_bf16_supported) now ask this one
    dtype = dtype or default_dtype(device)
    try:
        check_supported(dtype, device)
        if workload_name == "gemm" and not size:
            size = gemm_size(device, dtype)
        workload = WORKLOADS[workload_name](device, dtype, size, inject)
    except (ValueError, RuntimeError) as exc:
        emit({"type": "error", "message": str(exc)})
        return 2
    emit({"type": "start", "workload": workload_name, "device": str(device), "dtype": dtype,
          "unit": workload.unit, "torch": torch.__version__, "cuda_runtime": torch.version.cuda,
          **workload.describe(),
          "tf32": bool(torch.backends.cuda.matmul.allow_tf32),
          "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"})
    additions = ReportAdditions(workload, latency_percentiles_ms)
    totals = drive(workload, seconds, emit, fence=fence_for(device),
                   check_period_s=float(getattr(workload, "check_period_s", check_period_s)),
                   on_report=additions)
    emit({"type": "done", **totals, **additions.run_latency()})
    return 0


def main(argv: list[str] | None = None) -> int:
    args = child_parser(WORKLOADS, _DTYPES).parse_args(argv)
    if args.parent_pid:
        die_with_parent(args.parent_pid)
    if args.threads:
        torch.set_num_threads(args.threads)
    inject = args.inject_faults or os.environ.get("RIGSCOPE_STRESS_INJECT_FAULT") == "1"
    try:
        return run(args.workload, args.device, args.dtype, args.seconds, size=args.size, inject=inject)
    except torch.cuda.OutOfMemoryError as exc:
        emit({"type": "error", "message": f"out of GPU memory: {exc}"})
        return 3


if __name__ == "__main__":
    sys.exit(main())
