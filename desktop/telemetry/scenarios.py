"""A realistic simulated week for demo history: what an AI developer's GPU does Monday to Sunday.

GPU 0 (the laptop GPU of the reference machine), times in UTC:
  Mon 09:30 - Tue 02:30  a long training run (train.py), VRAM at ~93 %: little headroom
  Tue 10:00 - 17:30      fine-tuning bursts (finetune_lora.py), 40 min on, 15 off
  Tue 19:30 - 23:30      a memory-bound training run (train_recsys.py: embedding lookups, small
                         batches): utilization ~97 % at about a third of the power (intensity 0.35)
  Wed 09:00 - 12:00      notebook experiments in bursts (ipykernel), holding 6 GiB ...
  Wed 12:00 - Thu 10:30  ... and the forgotten notebook keeps holding it while idle
  Thu 13:00 - Fri 01:00  a data-loader-starved training run (train_dataloader.py): GPU ~55 %,
                         CPU saturated
  Fri 14:00 - Sun 12:00  inference serving (llama-server), bursty low load
  Sun 15:00 - 16:00      a benchmark on battery power (bench.py)
  nights and the rest    idle
Further GPUs run one long distributed training (train_ddp.py) Tue 20:00 - Thu 08:00.
The seed moves episode edges by a few minutes and varies the bursts; it is deterministic.

The machine is a shared workstation: ``dev`` trains and fine-tunes (and benchmarks), ``ana`` serves
a model from a Docker container (``docker:llm-serve``) and experiments in a notebook, ``sam`` runs
the memory-bound recommender. Each episode carries the user, the command line as people type it
and the container, so demo history has something to say under `rigscope usage --by user|command|container`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from desktop.telemetry.model import HostSample
from desktop.telemetry.simulated.load import Demand, ProcessDetail, simulated_host_sample

WEEK_S = 7 * 86400
_IDLE_DEMAND = Demand()
#: Epoch 0 was a Thursday; this offset makes week offsets start on Monday 00:00 UTC.
_MONDAY_OFFSET_S = 4 * 86400


def week_start(time_s: float) -> float:
    """Monday 00:00 UTC of the week holding ``time_s``."""
    return time_s - ((time_s - _MONDAY_OFFSET_S) % WEEK_S)


def _at(day: int, hour: float) -> float:
    return day * 86400 + hour * 3600


@dataclass(frozen=True, slots=True)
class Episode:
    start_s: float  # offset within the week
    end_s: float
    kind: str  # training | finetune | notebook | notebook-idle | memory-bound | starved | serving | battery
    process: str
    pid: int
    load: float
    vram_frac: float
    mem_util: float
    cpu_pct: float
    pcie_kib_s: float = 0.0
    vram_mib: float | None = None  # absolute, overrides vram_frac
    on_ac_power: bool = True
    #: Power per unit of load relative to a compute-bound GEMM (``Demand.intensity``).
    intensity: float = 1.0
    #: Who runs it, its command line as people type it, and the container it runs in (None: on the host).
    user: str = "dev"
    command: str | None = None
    container: str | None = None


#: The users and command lines of the demo week (the process name is what the driver lists).
_DEV, _ANA, _SAM = "dev", "ana", "sam"
TRAIN_CMD = "python train.py --cfg llama.yaml"
FINETUNE_CMD = "python finetune_lora.py --base qwen2.5-7b --rank 16"
RECSYS_CMD = "python train_recsys.py --emb-dim 256 --batch 64"
NOTEBOOK_CMD = "python -m ipykernel_launcher -f ~/.local/share/jupyter/runtime/kernel-5120.json"
STARVED_CMD = "python train_dataloader.py --workers 2"
SERVE_CMD = "llama-server -m qwen2.5-7b.gguf --port 8080"
BENCH_CMD = "python bench.py --quick"
DDP_CMD = "torchrun --nproc-per-node 2 train_ddp.py --cfg llama.yaml"
#: The inference server's container, labelled as advisor.attribution labels Docker's.
SERVE_CONTAINER = "docker:llm-serve (4f9c2a7d81b3)"


def _hash01(*parts: int) -> float:
    """A cheap deterministic pseudo-random number in [0, 1) (no RNG state in the hot loop)."""
    h = 2166136261
    for part in parts:
        h = ((h ^ (part & 0xFFFFFFFF)) * 16777619) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 2246822519) & 0xFFFFFFFF
    h ^= h >> 13
    return h / 4294967296.0


class WeekScenario:
    """The demo week, repeating every week, for GPUs with the given VRAM sizes."""

    def __init__(self, vram_total_mib: list[float], seed: int = 0) -> None:
        self.seed = seed
        self.vram_total_mib = vram_total_mib
        self._episodes = [self._plan(i) for i in range(len(vram_total_mib))]
        self._starts = [[e.start_s for e in eps] for eps in self._episodes]
        # Demands repeat (same episode, same load): reuse them instead of building one a second.
        self._cache: dict[tuple[int, int, float], Demand] = {}

    def _jitter(self, key: int) -> float:
        return (_hash01(self.seed, key) - 0.5) * 20 * 60  # +-10 minutes

    def _plan(self, gpu_index: int) -> list[Episode]:
        j = self._jitter
        if gpu_index > 0:
            return [Episode(_at(1, 20) + j(100 + gpu_index), _at(3, 8), "training", "train_ddp.py", 4100 + gpu_index,
                            0.95, 0.80, 0.6, 30.0, 150_000, command=DDP_CMD)]
        eps = [
            Episode(_at(0, 9.5) + j(1), _at(1, 2.5) + j(2), "training", "train.py", 2311,
                    0.97, 0.93, 0.6, 35.0, 200_000, command=TRAIN_CMD),
        ]
        # Fine-tuning bursts: 40 min on, 15 min off, a new process each time.
        t = _at(1, 10) + j(3)
        n = 0
        while t < _at(1, 17.5):
            eps.append(Episode(t, t + 40 * 60, "finetune", "finetune_lora.py", 3100 + n, 0.88, 0.70, 0.5, 25.0, 80_000,
                               command=FINETUNE_CMD))
            t += 55 * 60
            n += 1
        # Memory-bound: kernels back to back (utilization ~97 %) that wait on DRAM: a third of the power.
        eps.append(Episode(_at(1, 19.5) + j(9), _at(1, 23.5) + j(10), "memory-bound", "train_recsys.py", 9100,
                           0.97, 0.55, 0.9, 30.0, 100_000, intensity=0.35, user=_SAM, command=RECSYS_CMD))
        # Notebook: bursts inside a session that keeps 6 GiB, then forgotten.
        held = 6144.0
        t = _at(2, 9)
        k = 0
        while t < _at(2, 12):
            on = (3 + 7 * _hash01(self.seed, 50 + k)) * 60
            off = (5 + 10 * _hash01(self.seed, 80 + k)) * 60
            eps.append(Episode(t, min(t + on, _at(2, 12)), "notebook", "ipykernel_launcher", 5120, 0.8, 0.0, 0.4, 15.0,
                               20_000, vram_mib=held, user=_ANA, command=NOTEBOOK_CMD))
            if t + on < _at(2, 12):
                eps.append(Episode(t + on, min(t + on + off, _at(2, 12)), "notebook", "ipykernel_launcher", 5120, 0.0,
                                   0.0, 0.0, 3.0, 0.0, vram_mib=held, user=_ANA, command=NOTEBOOK_CMD))
            t += on + off
            k += 1
        eps.append(Episode(_at(2, 12), _at(3, 10.5) + j(4), "notebook-idle", "ipykernel_launcher", 5120, 0.0, 0.0, 0.0,
                           3.0, 0.0, vram_mib=held, user=_ANA, command=NOTEBOOK_CMD))
        eps.append(Episode(_at(3, 13) + j(5), _at(4, 1) + j(6), "starved", "train_dataloader.py", 6200, 0.55, 0.75,
                           0.4, 97.0, 400_000, command=STARVED_CMD))
        eps.append(Episode(_at(4, 14) + j(7), _at(6, 12) + j(8), "serving", "llama-server", 7300, 0.25, 0.62, 0.3,
                           12.0, 5_000, user=_ANA, command=SERVE_CMD, container=SERVE_CONTAINER))
        eps.append(Episode(_at(6, 15), _at(6, 16), "battery", "bench.py", 8400, 0.9, 0.40, 0.5, 40.0, 50_000,
                           on_ac_power=False, command=BENCH_CMD))
        eps.sort(key=lambda e: e.start_s)
        return eps

    def episodes(self, gpu_index: int) -> list[Episode]:
        """The GPU's episodes of one week, in order (offsets from Monday 00:00 UTC)."""
        return list(self._episodes[gpu_index]) if gpu_index < len(self._episodes) else []

    def _find(self, gpu_index: int, time_s: float) -> int:
        if gpu_index >= len(self._episodes):
            return -1
        offset = (time_s - _MONDAY_OFFSET_S) % WEEK_S
        pos = bisect.bisect_right(self._starts[gpu_index], offset) - 1
        if pos < 0 or offset >= self._episodes[gpu_index][pos].end_s:
            return -1
        return pos

    def episode(self, gpu_index: int, time_s: float) -> Episode | None:
        pos = self._find(gpu_index, time_s)
        return self._episodes[gpu_index][pos] if pos >= 0 else None

    def demand(self, gpu_index: int, time_s: float) -> Demand:
        pos = self._find(gpu_index, time_s)
        if pos < 0:
            return _IDLE_DEMAND
        ep = self._episodes[gpu_index][pos]
        load = ep.load
        if ep.kind == "training" and int(time_s) % 1800 < 60:
            load = 0.3  # evaluation and checkpoint every 30 minutes
        elif ep.kind == "starved":
            load = 0.92 if int(time_s) % 40 < 22 else 0.08  # waiting on the data loader
        elif ep.kind == "serving":
            minute = int(time_s // 60)
            load = 0.05 + 0.6 * _hash01(self.seed, minute) ** 2
        key = (gpu_index, pos, load)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if len(self._cache) > 8192:
            self._cache.clear()
        vram = ep.vram_mib if ep.vram_mib is not None else ep.vram_frac * self.vram_total_mib[gpu_index]
        demand = Demand(load=load, vram_mib=vram, mem_util=ep.mem_util, pcie_kib_s=ep.pcie_kib_s * (load > 0.05),
                        processes=((ep.pid, ep.process, vram),), intensity=ep.intensity,
                        details=(ProcessDetail(load, ep.command),))
        self._cache[key] = demand
        return demand

    def host(self, time_s: float) -> HostSample:
        """The host reading that goes with GPU 0's episode (CPU load, power source)."""
        ep = self.episode(0, time_s)
        if ep is None:
            return simulated_host_sample(cpu_pct=4.0 + 4.0 * _hash01(self.seed, int(time_s // 60)))
        return simulated_host_sample(cpu_pct=ep.cpu_pct, on_ac_power=ep.on_ac_power,
                                     ram_used_mib=14000.0 if ep.cpu_pct > 20 else 9000.0)
