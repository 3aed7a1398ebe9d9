"""Portable run records on this machine: capturing the environment, building records from a stress
run or a job, and reading and writing record files (`-o FILE`, `--baseline FILE`, `rigscope compare`).

The format and the comparison are pure (``advisor.portable``); this module adds what needs
the machine: versions (torch's through ``importlib.metadata``: torch itself is never imported
here, this runs in the CLI and GUI processes), the host's name and the files.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from advisor.portable import Environment, Latency, PortableRecord, Spread, energy_joules, finite_or_none
from advisor.portable_legacy import legacy_record
from advisor.portable_read import MAX_RECORD_BYTES, PortableError, parse_record_bytes
from advisor.safetext import printable
from advisor.verdict_model import Verdict
from desktop import __version__
from desktop.errors import UserError
from desktop.history.job_model import JobRecord  # the history's own type: stress never imports jobs
from desktop.safeio import FileRefused, read_bounded
from desktop.stress.records import gpu_identity
from desktop.stress.run_model import RunResult
from desktop.telemetry.model import GpuInfo

FloatArray = npt.NDArray[np.float64]


def torch_version() -> str | None:
    """The installed torch's version, without importing it (None when it is not installed)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def capture_environment(gpu: GpuInfo | None, start_info: Mapping[str, Any] | None = None, *,
                        simulated: bool = False, cpu_name: str | None = None) -> Environment:
    """The environment of a run: the GPU's facts from NVML, torch and its CUDA build from the workload
    child's start record when there is one (what really ran), else from the installed package."""
    info = start_info or {}
    torch = info.get("torch")
    runtime = info.get("cuda_runtime")
    return Environment(
        gpu_name=gpu.name if gpu is not None else cpu_name,
        driver=gpu.driver_version if gpu is not None else None,
        cuda_driver=gpu.cuda_version if gpu is not None else None,
        cuda_runtime=str(runtime) if runtime else None,
        # The simulated GPU runs no torch: a version there would be a difference that explains nothing.
        torch=str(torch) if torch else (None if simulated else torch_version()),
        rigscope=__version__,
        power_limit_w=gpu.power_limit_enforced_w if gpu is not None else None,
        os=f"{platform.system()} {platform.release()}".strip() or None,
        python=platform.python_version(),
        simulated=simulated or (gpu is not None and gpu.simulated))


def machine_name() -> str | None:
    return platform.node() or None


def _column(columns: Mapping[str, FloatArray], name: str) -> FloatArray | None:
    values = columns.get(name)
    return None if values is None else np.asarray(values, dtype=np.float64)


def _spreads(columns: Mapping[str, FloatArray]) -> tuple[Spread, Spread, Spread]:
    def spread(name: str) -> Spread:
        values = _column(columns, name)
        return Spread() if values is None else Spread.of(values)
    return spread("sm_clock_mhz"), spread("temperature_c"), spread("power_w")


def _latency(extra: Mapping[str, Any]) -> Latency | None:
    values = [finite_or_none(extra.get(k)) for k in ("p50_ms", "p95_ms", "p99_ms")]
    return None if all(v is None for v in values) else Latency(*values)


def record_from_stress(result: RunResult, verdict: Verdict, *, price_per_hour: float | None = None,
                       currency: str | None = None, machine: str | None = None) -> PortableRecord:
    """The portable record of a finished (or aborted) stress run and its verdict."""
    cpu = result.config.device == "cpu"
    _uuid, name, _driver = gpu_identity(result)
    gpu = None if cpu else result.gpu
    clock, temperature, power = _spreads(result.columns)
    energy = energy_joules(result.time_s, _column(result.columns, "power_w"), _column(result.columns, "energy_mj"))
    throughput = finite_or_none(verdict.sustained) if verdict.basis == "throughput" else None
    peak = finite_or_none(verdict.peak) if verdict.basis == "throughput" else None
    measured = np.asarray(result.throughput, dtype=np.float64)
    measured = measured[np.isfinite(measured)]
    if throughput is None and measured.size:
        # Too short for a verdict's sustained level, but it did measure: the median is its throughput.
        throughput, peak = float(np.median(measured)), float(measured.max())
    return PortableRecord(
        kind="stress", workload=result.config.workload, started_s=result.started_s,
        duration_s=max(0.0, result.ended_s - result.started_s),
        environment=capture_environment(gpu, result.extra, simulated=result.config.device == "sim",
                                        cpu_name=name if cpu else None),
        machine=machine if machine is not None else machine_name(), device=result.config.device,
        dtype=result.dtype or None, unit=(result.unit or verdict.unit or None), throughput=throughput,
        peak_throughput=peak, latency=_latency(result.extra), sm_clock_mhz=clock, temperature_c=temperature,
        power_w=power, energy_j=energy, verdict=verdict.status, verdict_sentence=verdict.sentence,
        throttled=verdict.throttled, errors=max(result.errors, verdict.errors),
        price_per_hour=price_per_hour, currency=currency if price_per_hour is not None else None)


def _card_value(card: Mapping[str, Any], *paths: str) -> Any:
    """The first of ``paths`` ("a.b" for nested) the card has, else None."""
    for path in paths:
        node: Any = card
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            return node
    return None


def _card_number(card: Mapping[str, Any], *paths: str) -> float | None:
    value = _card_value(card, *paths)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return finite_or_none(float(value))


def _running_rows(time_s: FloatArray, columns: Mapping[str, FloatArray],
                  pauses: Sequence[tuple[float, float]]) -> dict[str, FloatArray]:
    """``columns`` without the samples taken while the guard held the job stopped."""
    times = np.asarray(time_s, dtype=np.float64)
    running = np.ones(len(times), dtype=bool)
    for start, end in pauses:
        running &= ~((times >= start) & (times < end))
    return {name: np.asarray(values, dtype=np.float64)[:len(times)][running] for name, values in columns.items()}


def record_from_job(job: JobRecord, card: Mapping[str, Any] | None = None, *,
                    time_s: FloatArray | None = None, columns: Mapping[str, FloatArray] | None = None,
                    gpu: GpuInfo | None = None, price_per_hour: float | None = None, currency: str | None = None,
                    machine: str | None = None, pauses: Sequence[tuple[float, float]] = ()) -> PortableRecord:
    """The portable record of a job run under `rigscope run`: the job's card (``advisor.job_card.JobCard.as_dict()``)
    written as a record. Every figure the card has (energy, mean power, throughput, verdict, throttled) is
    the card's: the record, the printed card, `rigscope jobs show` and the Jobs page are one object. The
    spreads the card has not (percentiles of clock, temperature and power) come from the GPU samples over
    its span (``time_s``/``columns``) while the job ran (``pauses`` left out)."""
    card = card if card is not None else (job.card or {})
    raw = columns or {}
    columns = _running_rows(time_s, raw, pauses) if raw and time_s is not None else {}
    clock, temperature, power = _spreads(columns)
    gpus = card.get("gpus") if isinstance(card.get("gpus"), list) else []
    first_gpu: Mapping[str, Any] = gpus[0] if gpus and isinstance(gpus[0], Mapping) else {}
    mean = _card_number(first_gpu, "mean_power_w")  # the card's figure (advisor.job_figures.GpuFigures)
    if mean is not None:
        power = Spread(p5=power.p5, p50=power.p50, p95=power.p95, mean=mean)
    if temperature.empty:
        top = _card_number(first_gpu, "peak_temperature_c")
        temperature = Spread(p95=top) if top is not None else temperature
    wh = _card_number(card, "energy_wh")
    energy = wh * 3600.0 if wh is not None else None
    if energy is None and time_s is not None and raw:  # no card: the samples, as a stress record counts them
        energy = energy_joules(time_s, _column(raw, "power_w"), _column(raw, "energy_mj"))
    throughput = _card_number(card, "throughput_mean")
    if job.exit_code is None:
        verdict = "running"
    else:
        verdict = "completed" if job.exit_code == 0 else f"failed (exit {job.exit_code})"
    sentence = _card_value(card, "verdict")
    unit = job.throughput_unit or _card_value(card, "throughput_unit")
    throttled = card.get("throttled")  # the verdict's answer, as the card has it
    if not isinstance(throttled, bool):
        throttle = first_gpu.get("throttle_s")
        # Held at the power cap is normal under load (as in the stress verdict); the other causes throttle.
        throttled = (any(isinstance(v, int | float) and v > 0 for k, v in throttle.items() if k != "sw_power_cap")
                     if isinstance(throttle, Mapping) else None)
    peak = None
    return PortableRecord(
        kind="job", workload=job.name or " ".join(job.argv)[:80] or "job", started_s=job.started_s,
        duration_s=job.duration_s or 0.0, environment=capture_environment(gpu, simulated=job.source == "simulated"),
        machine=machine if machine is not None else machine_name(),
        device=",".join(str(i) for i in job.gpu_indices) or None,
        unit=unit if isinstance(unit, str) else None, throughput=throughput, peak_throughput=peak,
        sm_clock_mhz=clock, temperature_c=temperature, power_w=power, energy_j=energy, verdict=verdict,
        verdict_sentence=sentence if isinstance(sentence, str) else "",
        throttled=throttled, price_per_hour=price_per_hour, currency=currency if price_per_hour is not None else None)


# --- files -----------------------------------------------------------------------------------


def read_record(path: Path) -> PortableRecord:
    """The record in ``path``; a UserError naming the file and what is wrong with it (in one line: the field,
    for a value past the parser's limits). `compare`, `stress --baseline` and the Compare dialog read here."""
    shown = printable(path)
    try:  # one byte past the cap, so the parser says the record is too large; a FIFO must not hang compare
        data = read_bounded(path, MAX_RECORD_BYTES + 1, truncate=True)
    except FileNotFoundError:
        raise UserError(f"cannot read {shown}: no such file") from None
    except (IsADirectoryError, FileRefused) as exc:
        if path.is_dir():
            raise UserError(f"cannot read {shown}: it is a folder, not a run record") from None
        raise UserError(f"cannot read {shown}: it {printable(getattr(exc, 'why', exc))}") from None
    except OSError as exc:
        raise UserError(f"cannot read {shown}: {exc.strerror or exc}") from None
    try:
        return parse_record_bytes(data, legacy=legacy_record)  # older Rigscope JSON is read too
    except PortableError as exc:  # one line naming the file and the field (advisor.portable_read's limits)
        raise UserError(f"{shown}: {printable(exc)}") from None


def read_records(paths: Sequence[Path]) -> list[PortableRecord]:
    return [read_record(path) for path in paths]


def write_record(path: Path, record: PortableRecord) -> None:
    """Write ``record`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    text = record.to_json()
    directory = path.parent
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
