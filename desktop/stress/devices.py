"""Which NVML GPU a ``cuda:N`` device is, and which precision it runs natively (pure: no torch, no NVML).

CUDA numbers devices fastest first and honours CUDA_VISIBLE_DEVICES; NVML numbers them by
PCI bus. So ``cuda:0`` is often not NVML GPU 0: the workload child reports its device's
UUID and PCI address (read with torch, in the child only) and the runner finds the NVML
GPU with the same UUID, else the same bus address. When neither matches, the test is
refused: a guard watching the wrong GPU would let the loaded one overheat.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from advisor.wording import count_text
from desktop.errors import UserError
from desktop.telemetry.model import GpuInfo

_BUS_ID = re.compile(r"^\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-7])?\s*$")
_UUID_PREFIXES = ("gpu-", "mig-")


@dataclass(frozen=True)
class GpuTarget:
    """The device a stress test loads, made once (the stress session, from ``--gpu N``, ``--simulate``,
    ``--device`` or the Stress page's picker) and passed down as one value instead of re-spelled on the way:
    it is ``StressConfig.target``, the config's only device (its ``device`` is this ``name``, its ``gpu_index``
    this ``nvml_index``).

    As nvitop's ``CudaDevice``, it holds each numbering at once: NVML's index (what the sampler, the guard,
    the GPU locks and the history read), CUDA's ordinal (what the workload child is started on; the runner
    starts it with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, NVML's order, so the two agree unless
    CUDA_VISIBLE_DEVICES renumbers), and the UUID and PCI bus id that tell the GPU apart wherever the numbers
    do not (filled in where NVML has been read: ``known_as``). The runner still confirms from the child's own
    identity which NVML GPU the child got (``map_cuda_device``)."""

    kind: str  # cuda | cpu | sim
    nvml_index: int = 0
    #: CUDA's number for it (cuda only; None for the CPU and the simulated GPU).
    cuda_ordinal: int | None = None
    uuid: str | None = None
    bus_id: str | None = None
    #: Said to the user: why the default device is the simulated GPU.
    note: str | None = None

    @classmethod
    def cuda(cls, nvml_index: int, cuda_ordinal: int | None = None) -> GpuTarget:
        """NVML GPU ``nvml_index`` under CUDA (its ordinal: the same number in the PCI bus order, unless given)."""
        return cls("cuda", nvml_index, nvml_index if cuda_ordinal is None else cuda_ordinal)

    @property
    def name(self) -> str:
        """The device as the workload child, the device lock and the stored run spell it: cuda:N, cpu or sim."""
        return f"cuda:{self.cuda_ordinal or 0}" if self.kind == "cuda" else self.kind

    @property
    def simulated(self) -> bool:
        return self.kind == "sim"

    def known_as(self, info: GpuInfo) -> GpuTarget:
        """This target with NVML's facts on its GPU (UUID, PCI bus id); ``info`` must be its NVML index's."""
        if info.index != self.nvml_index:
            raise ValueError(f"NVML GPU {info.index} is not the target's GPU {self.nvml_index}")
        return replace(self, uuid=info.uuid or self.uuid, bus_id=info.pci_bus_id or self.bus_id)

    def is_gpu(self, info: GpuInfo) -> bool:
        """Whether ``info`` is this GPU, by UUID, else by PCI bus id; True when neither is known (nothing to tell
        them apart by: the caller's own mapping decides)."""
        if self.uuid and info.uuid:
            return _uuid_key(self.uuid) == _uuid_key(info.uuid)
        if self.bus_id and info.pci_bus_id:
            return bus_key(self.bus_id) == bus_key(info.pci_bus_id)
        return True

    def label(self) -> str:
        """How the user picked it: "GPU 1 (cuda:1)", "the CPU", "the simulated GPU 0"."""
        if self.kind == "cpu":
            return "the CPU"
        if self.simulated:
            return f"the simulated GPU {self.nvml_index}"
        return f"GPU {self.nvml_index} ({self.name})"


class DeviceMappingError(UserError):
    """The CUDA device cannot be matched to a GPU that NVML reads: the test would watch the wrong GPU."""


@dataclass(frozen=True)
class CudaIdentity:
    """What the workload child says about its CUDA device (the first record it writes)."""

    index: int
    count: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    name: str | None = None
    visible_devices: str | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CudaIdentity:
        def text(key: str) -> str | None:
            value = record.get(key)
            return str(value) if value not in (None, "") else None

        return cls(index=int(record.get("index", 0)), count=int(record.get("count", 0)), uuid=text("uuid"),
                   pci_bus_id=text("pci_bus_id"), name=text("name"), visible_devices=text("visible_devices"))

    def as_record(self) -> dict[str, Any]:
        return {"type": "device", "index": self.index, "count": self.count, "uuid": self.uuid,
                "pci_bus_id": self.pci_bus_id, "name": self.name, "visible_devices": self.visible_devices}


def nvml_uuid(raw: object) -> str | None:
    """torch's ``"a1b2c3d4-..."`` (or NVML's ``"GPU-a1b2c3d4-..."``) as NVML writes it."""
    text = str(raw).strip() if raw is not None else ""
    if not text:
        return None
    lowered = text.lower()
    for prefix in _UUID_PREFIXES:
        if lowered.startswith(prefix):
            return prefix.upper() + lowered[len(prefix):]
    return "GPU-" + lowered


def pci_bus_id(domain: int, bus: int, device: int) -> str:
    """NVML's form of a PCI address (``nvmlPciInfo_t.busId``): ``"00000000:01:00.0"``."""
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


def bus_key(text: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of any common spelling: NVML's 8-digit domain, the legacy 4-digit one, or none."""
    if not text:
        return None
    match = _BUS_ID.match(text)
    if match is None:
        return None
    domain, bus, device = match.groups()
    return int(domain or "0", 16), int(bus, 16), int(device, 16)


def _uuid_key(text: str | None) -> str | None:
    uuid = nvml_uuid(text)
    if uuid is None:
        return None
    # Compare the hex digits only: the prefix differs between a MIG instance and its GPU.
    return uuid.split("-", 1)[1]


def cuda_index_problem(index: int, count: int, visible_devices: str | None = None) -> str | None:
    """Why ``cuda:index`` cannot be used, or None: the index is checked against CUDA's count, not NVML's."""
    if count <= 0:
        return "CUDA sees no GPU here" + (f" (CUDA_VISIBLE_DEVICES={visible_devices!r})" if visible_devices is not None
                                          else "")
    if 0 <= index < count:
        return None
    visible = f", CUDA_VISIBLE_DEVICES={visible_devices!r}" if visible_devices is not None else ""
    last = f"cuda:0 to cuda:{count - 1}" if count > 1 else "cuda:0 only"
    return f"there is no cuda:{index}: CUDA sees {count_text(count, 'GPU')} ({last}{visible})"


def map_cuda_device(identity: CudaIdentity, gpus: Sequence[GpuInfo]) -> GpuInfo:
    """The NVML GPU that ``cuda:<identity.index>`` runs on; raises DeviceMappingError when none is certain."""
    problem = cuda_index_problem(identity.index, identity.count, identity.visible_devices)
    if problem:
        raise DeviceMappingError(problem)
    wanted_uuid = _uuid_key(identity.uuid)
    if wanted_uuid is not None:
        for info in gpus:
            if _uuid_key(info.uuid) == wanted_uuid:
                return info
    wanted_bus = bus_key(identity.pci_bus_id)
    if wanted_bus is not None:
        for info in gpus:
            if bus_key(info.pci_bus_id) == wanted_bus:
                return info
    if wanted_uuid is None and wanted_bus is None and identity.count == 1 and len(gpus) == 1:
        # A torch too old to report either: one GPU to NVML and one to CUDA can only be the same one.
        return gpus[0]
    seen = ", ".join(f"{g.index}: {g.uuid or '?'} at {g.pci_bus_id or '?'}" for g in gpus) or "none"
    raise DeviceMappingError(
        f"cannot tell which GPU cuda:{identity.index} is ({identity.name or 'unnamed'}, "
        f"UUID {identity.uuid or 'unknown'}, PCI {identity.pci_bus_id or 'unknown'}); NVML sees {seen}. "
        "The temperature guard would watch the wrong GPU, so the test is not started")


# --- the CPU, when it stands in for a GPU (--device cpu) ---------------------------------------

#: The fields of /proc/cpuinfo that name the processor: x86's "model name"; ARM kernels write
#: "Model" (a Raspberry Pi) or "Hardware", and many only "CPU part" (no name).
_CPUINFO_NAMES = ("model name", "Model", "Hardware", "cpu model")


def cpu_model_name(cpuinfo: Path = Path("/proc/cpuinfo"), processor: str | None = None) -> str:
    """The CPU's model ("AMD Ryzen 9 7945HX with Radeon Graphics"), not the architecture "x86_64" that
    ``platform.processor()`` answers on Linux: /proc/cpuinfo first, then ``platform.processor()``
    where it says more than the machine type (Windows: "Intel64 Family 6 Model 183 ..."), else "CPU"."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        text = ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), " ".join(value.split())
        if sep and value and key in _CPUINFO_NAMES and key not in found:
            found[key] = value
    for key in _CPUINFO_NAMES:
        if key in found:
            return found[key]
    named = " ".join((processor if processor is not None else platform.processor()).split())
    if named and named.lower() not in {platform.machine().lower(), "x86_64", "amd64", "aarch64", "arm64", "i386",
                                       "i686"}:
        return named
    return f"{platform.machine()} CPU" if platform.machine() else "CPU"


# --- precision ---------------------------------------------------------------------------


def bf16_native(is_bf16_supported: Callable[..., bool], capability: tuple[int, int]) -> bool:
    """Whether the device runs bf16 in hardware (Ampere, sm_80, and newer), not emulated through fp32.

    ``is_bf16_supported(including_emulation=False)`` where torch has the argument (2.3+);
    older torch answers True for emulated bf16 too, so decide by the capability there.
    """
    try:
        return bool(is_bf16_supported(including_emulation=False))
    except TypeError:
        return capability[0] >= 8


def default_dtype(device_type: str, bf16_is_native: bool) -> str:
    """The fastest precision a stress test should use by default on this device."""
    if device_type == "cuda":
        return "bf16" if bf16_is_native else "fp16"
    return "fp32"
