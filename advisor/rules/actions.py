"""Action texts for recommendations, tailored to laptop or desktop and to Linux or Windows.

Kept apart from the rules so that the wording can be reviewed in one place. A laptop GPU's
power limit belongs to the vendor's firmware: nothing here ever suggests `nvidia-smi -pl`
unless the driver says the limit can be set (``power_limit_settable`` is True).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from advisor.frame import GpuMeta, StressResult
from advisor.safetext import printable


def _windows(platform: str) -> bool:
    return platform.lower().startswith("win")


def can_set_power_limit(meta: GpuMeta) -> bool:
    """Only when the driver says so, and never on a laptop GPU (GeForce laptops refuse `-pl`)."""
    return meta.power_limit_settable is True and not meta.is_laptop


def vram(cloud_hint: str) -> str:
    text = ("Free VRAM before the next long run: train in mixed precision (bf16/fp16 autocast), turn on "
            "gradient checkpointing (about 20 % slower, much less activation memory), use a smaller batch "
            "with gradient accumulation, an 8-bit optimizer (bitsandbytes: 6 instead of 12 bytes per "
            "parameter of optimizer state), or LoRA/QLoRA instead of a full fine-tune.")
    return f"{text} {cloud_hint}" if cloud_hint else text


def low_util_cpu_bound(platform: str) -> str:
    text = ("The GPU waits for input while the CPU is saturated: give the DataLoader worker processes "
            "(num_workers > 0, about one per free core), pin_memory=True, prefetch_factor >= 2 and "
            "persistent_workers=True; move decoding and augmentation to the GPU or preprocess once and cache.")
    if _windows(platform):
        text += (" On Windows, DataLoader workers are spawned, not forked: keep the training code under "
                 "`if __name__ == '__main__':` and keep worker start-up cheap.")
    return text


def low_util_gpu_waits() -> str:
    return ("The GPU idles between kernels although the CPU has room: raise the batch size if VRAM allows, "
            "avoid per-step host syncs (.item(), .cpu(), printing losses every step), use pin_memory=True "
            "with non_blocking copies, and profile one epoch (torch.profiler) to see where the time goes.")


def thermal(meta: GpuMeta, platform: str) -> str:
    if meta.is_laptop:
        mode = ("the vendor's performance mode (MSI Center 'Extreme Performance' with Cooler Boost, "
                "Armoury Crate 'Turbo', Lenovo Vantage 'Performance')")
        if not _windows(platform):
            mode = ("the firmware's performance mode (set it in the vendor tool before booting Linux, or with "
                    "the platform profile: `powerprofilesctl set performance`)")
        return (f"Switch to {mode}, raise the back of the laptop for airflow (a cooling pad helps), keep the "
                "vents clear and have dust cleaned from the fans; repasting helps an older machine.")
    text = ("Give the card more air: a steeper fan curve, clean the heatsink and filters, check the case "
            "airflow (front intake, rear/top exhaust).")
    if can_set_power_limit(meta):
        text += (f" A slightly lower power limit often costs little speed and removes the thermal throttle: "
                 f"`{'sudo nvidia-smi' if not _windows(platform) else 'nvidia-smi.exe'} -i {meta.index} -pl "
                 f"{_lower_limit(meta)}` (administrator rights; resets at reboot).")
    return text


def _lower_limit(meta: GpuMeta) -> int:
    return int(math.floor((meta.power_limit_w or 300.0) * 0.85 / 5.0 + 0.5) * 5)


def power_cap(meta: GpuMeta, platform: str, on_battery_share: float) -> str:
    parts = []
    if on_battery_share > 0.05:
        parts.append("Part of this ran on battery: plug the charger in, the GPU gets its full power only on AC.")
    if meta.is_laptop:
        parts.append("A laptop GPU's power limit is set by the firmware's power mode: choose the performance "
                     "mode (and Dynamic Boost where the vendor tool offers it) for long runs; the limit cannot "
                     "be raised from the driver.")
    elif can_set_power_limit(meta):
        tool = "nvidia-smi.exe" if _windows(platform) else "sudo nvidia-smi"
        parts.append(f"The driver allows a higher limit where cooling and the power supply have room: "
                     f"`{tool} -i {meta.index} -pl <watts>` up to the board maximum (resets at reboot); "
                     "hitting the limit at full load is otherwise normal.")
    else:
        parts.append("The driver does not allow changing this GPU's power limit; hitting it at full load is "
                     "normal, check that the power supply cables are fully seated.")
    return " ".join(parts)


def idle_memory(pid: int, name: str, platform: str) -> str:
    if "ipykernel" in name or "jupyter" in name:
        return (f"Restart or shut down the notebook kernel (PID {pid}) when you stop experimenting, or free "
                "memory in it (`del model; torch.cuda.empty_cache()`).")
    if _windows(platform):
        return f"Close {name} when idle, or end it in Task Manager / `taskkill /PID {pid}`."
    return f"Stop {name} when idle (`kill {pid}`), or free its memory with torch.cuda.empty_cache()."


def persistence() -> str:
    return ("Turn persistence mode on so every NVML/CUDA start does not pay a full GPU initialisation: "
            "`sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`, lost at reboot).")


def driver_changed(before: StressResult, change: str | None = None) -> str:
    """Rerun the Quick test now, and compare it with ``before``: the last stress run before the driver changed."""
    when = datetime.fromtimestamp(before.started_s, tz=UTC).astimezone()
    run = f"run {before.run_id}" if before.run_id > 0 else "the run"
    figures = printable(f"{before.workload} {before.dtype}")
    if before.sustained_throughput > 0:
        figures += f", {before.sustained_throughput:.4g} {printable(before.unit)} sustained"
    changed = f" ({printable(change)})" if change else ""
    return ("Now is the time to rerun the Quick test (2 min: Test page, Quick 2 min, or `rigscope stress --minutes 2`)"
            f": the driver changed{changed} since {run} of {when.day} {when.strftime('%b %Y')} ({figures}, driver "
            f"{printable(before.driver_version or 'unknown')}), the last stress run before it. The new run's verdict "
            "compares itself with your baseline, and the Test page's Earlier runs list both. A driver update can "
            "change clocks, power management and throughput.")


def stress_regression(meta: GpuMeta, platform: str) -> str:
    return ("Throughput fell against the baseline: check temperatures and throttle reasons during the run "
            "(dust, fan, ambient), the power mode, and background GPU processes; " + (
                "on a laptop, run on AC in the performance mode, as for the baseline." if meta.is_laptop
                else "compare clocks with the baseline run in the History page."))


def pcie(meta: GpuMeta) -> str:
    if meta.is_laptop:
        return ("The link ran below its maximum under load: check the BIOS PCIe setting and the vendor's GPU mode "
                "(a MUX/'discrete only' mode gives the full link).")
    return ("Reseat the card in a full x16 slot wired to the CPU, check riser cables and the BIOS PCIe "
            "generation setting; an x8 or Gen3 link slows host-device copies.")


#: On battery, power under this share of the limit is "far below" it.
BATTERY_FAR_BELOW_SHARE = 0.8


def battery(platform: str, mean_power_w: float | None = None, power_limit_w: float | None = None) -> str:
    """Plug in: with what the power on battery says (far below the limit only where it was)."""
    plan = "the Windows power mode 'Best performance'" if _windows(platform) else "AC power"
    power = mean_power_w if mean_power_w is not None and math.isfinite(mean_power_w) else None
    limit = power_limit_w or None
    if power is not None and limit is not None and power < BATTERY_FAR_BELOW_SHARE * limit:
        held = (f"on battery the GPU was held at {power:.0f} W, far below its {limit:g} W power limit, and the "
                "battery wears quickly")
    elif power is not None and limit is not None:
        held = (f"at {power:.0f} W from the battery (its limit {limit:g} W) the battery drains and wears "
                "quickly, and many laptops cut the GPU's limit as the charge falls")
    else:
        held = "on battery many laptops hold the GPU below its power limit, and the battery wears quickly"
    return f"Plug the charger in for heavy GPU work: {held}; schedule long jobs on {plan}."


def low_effective_load(memory_bound: bool) -> str:
    """Utilization high, effective load low: memory-bound kernels, small batches or a starved input pipeline."""
    first = ("The memory controller was busy meanwhile, so the kernels most likely wait on DRAM: "
             if memory_bound else "The memory controller was not the bottleneck, so the kernels are most likely "
                                  "too small to fill the GPU or wait on input: ")
    return (first + "raise the batch size (or use gradient accumulation less and larger micro-batches), train in "
            "bf16/fp16 (half the bytes per value), fuse element-wise work (torch.compile, fused optimizers, "
            "FlashAttention/SDPA) and feed data from pinned memory with num_workers > 0. Profile one step "
            "(torch.profiler) to see which kernels dominate; the stress test calibrates this estimate on your GPU.")


def hw_slowdown() -> str:
    return ("The board asserted a hardware slowdown (an external power-brake signal or a power supply at its "
            "limit): check that the power cables are fully seated and that the power supply has headroom; on a "
            "laptop use the original charger.")


def throttle_action(family: str | None, meta: GpuMeta, platform: str) -> str | None:
    """The action for a throttle a stress verdict or a log shows at once: the text the history rules give for it
    ("thermal", "power", "hw_slowdown"); None for no throttle or one with no action (unexplained)."""
    if family == "thermal":
        return thermal(meta, platform)
    if family == "power":
        return power_cap(meta, platform, 0.0)
    if family == "hw_slowdown":
        return hw_slowdown()
    return None
