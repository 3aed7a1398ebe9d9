"""The glue the GUI, reports and `rigscope advise` use: settings, price tables and history into advice.

The advisor itself is pure; this module does the I/O around it: it reads the cloud price and
GPU spec tables (a copy named ``cloud_prices.csv`` / ``gpu_specs.csv`` in the config folder
overrides the shipped one, so users can keep prices current), opens the history and builds
the frame.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.busy import DEFAULT_BUSY_UTIL_PCT
from advisor.costs import CloudOffer, CostComparison, CostInputs, GpuSpec, Usage, compare
from advisor.frame import GpuMeta, GpuSeries, HistoryFrame
from advisor.profile import INFERENCE, WorkloadProfile, gpu_profile, workload_profiles
from advisor.rules import Recommendation, run_rules
from advisor.rules.actions import throttle_action
from advisor.safetext import printable
from advisor.span import RecordedSpan, frame_span, recorded_span
from advisor.stats import busy_seconds, energy_kwh, nanmax
from advisor.thresholds import Thresholds
from advisor.wording import duration_text, plural_word
from desktop import config
from desktop.errors import UserError
from desktop.paths import config_dir, demo_db_path, resource_path

PRICES_FILE = "cloud_prices.csv"
SPECS_FILE = "gpu_specs.csv"


def table_path(name: str) -> Path:
    """The user's copy in the config folder when there is one, else the shipped table."""
    user = config_dir() / name
    return user if user.exists() else resource_path(name)


def _rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(f"{path}: missing {plural_word(len(missing), 'column')} {', '.join(missing)} "
                                f"(expected {', '.join(required)})")
            return list(reader)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from exc


def _number(path: Path, line: int, column: str, text: str, *, optional: bool = False) -> float | None:
    text = (text or "").strip()
    if not text and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{path}, line {line}: {column} must be a number, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UserError(f"{path}, line {line}: {column} must be a positive number")
    return value


def load_cloud_offers(path: Path | None = None) -> list[CloudOffer]:
    path = path or table_path(PRICES_FILE)
    cols = ("provider", "gpu_model", "vram_gb", "on_demand_usd_h", "spot_usd_h", "source", "date")
    offers = []
    for line, row in enumerate(_rows(path, cols), start=2):
        vram = _number(path, line, "vram_gb", row["vram_gb"])
        price = _number(path, line, "on_demand_usd_h", row["on_demand_usd_h"])
        assert vram is not None and price is not None
        offers.append(CloudOffer(row["provider"].strip(), row["gpu_model"].strip(), vram, price,
                                 _number(path, line, "spot_usd_h", row["spot_usd_h"], optional=True),
                                 row["source"].strip(), row["date"].strip()))
    return offers


def load_gpu_specs(path: Path | None = None) -> list[GpuSpec]:
    path = path or table_path(SPECS_FILE)
    specs = []
    for line, row in enumerate(_rows(path, ("model", "peak_bf16_tflops", "vram_gb")), start=2):
        tflops = _number(path, line, "peak_bf16_tflops", row["peak_bf16_tflops"])
        vram = _number(path, line, "vram_gb", row["vram_gb"])
        assert tflops is not None and vram is not None
        # Optional column (a copy made before it existed has none): the TGP the peak is stated at.
        at_w = _number(path, line, "peak_at_w", row.get("peak_at_w") or "", optional=True)
        specs.append(GpuSpec(row["model"].strip(), tflops, vram, at_w))
    return specs


def cost_inputs_from(settings: config.CostSettings) -> CostInputs:
    return CostInputs(settings.purchase_price, settings.amortisation_months, settings.electricity_price_per_kwh,
                      settings.currency)


@dataclass(frozen=True)
class Advice:
    """Everything the Advisor and Costs pages, `rigscope advise` and the reports show."""

    frame: HistoryFrame
    recommendations: tuple[Recommendation, ...]
    profiles: tuple[WorkloadProfile, ...]
    costs: tuple[CostComparison, ...]
    currency: str
    #: The thresholds the rules ran with: ``min_busy_hours`` is also how much history advice needs.
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def span(self) -> RecordedSpan:
        """How much history the advice is judged from: the recorded span of the best-covered GPU."""
        return frame_span(self.frame)

    @property
    def recorded_s(self) -> float:
        """The seconds of ``span``."""
        return self.span.recorded_s

    @property
    def busy_s(self) -> float:
        """The busy time of the busiest GPU in the history."""
        return max((float(busy_seconds(g, self.frame.processes, threshold_pct=self.thresholds.busy_util_pct).sum())
                    for g in self.frame.gpus), default=0.0)

    @property
    def needed_s(self) -> float:
        """The GPU load the rules need before they judge (``[advisor] min_busy_hours``): the one minimum."""
        return self.thresholds.min_busy_hours * 3600.0

    def shortfall(self) -> str | None:
        """None when the history holds enough load to judge, else a sentence with what it has and needs.

        Throttle rules judge the first data (``advisor.rules.base.FIRST_DATA_BUSY_S``): when they advised,
        the sentence says the minimum is for the rules that need history, not for the advice shown."""
        needed, busy, recorded = self.needed_s, self.busy_s, self.recorded_s
        if recorded > 0 and busy >= needed:
            return None
        if self.recommendations:  # the throttle rules judged the first data; the others wait for history
            need = (f"Advice from history (utilization, idle memory, runs) needs at least {span_text(needed)} of "
                    "recording with the GPU busy")
            after = ": what the first data shows is advised already."
        else:
            need, after = f"Advice needs at least {span_text(needed)} of recording with the GPU busy", "."
        if recorded <= 0:
            return f"{need}; this history has no samples yet{after}"
        if recorded < needed:
            return f"{need}; you have {span_text(recorded)} of recording{after}"
        return f"{need}; you have {span_text(recorded)} of recording, {span_text(busy)} of it busy{after}"

def span_text(seconds: float) -> str:
    """How much history, in plain words: "45 seconds", "5 minutes", "1.5 hours", "6 days" (advisor.wording)."""
    return duration_text(seconds)


def usage_of(frame: HistoryFrame, gpu: GpuSeries | str | int, *,
             busy_util_pct: float = DEFAULT_BUSY_UTIL_PCT) -> Usage:
    """The measured use of one GPU of ``frame``: the series itself, its identity (``GpuMeta.key``) or, for a
    frame whose GPUs each have their own index, its index. Its monthly figures extrapolate from the time
    recorded (``advisor.span``), never the window's length."""
    series = gpu if isinstance(gpu, GpuSeries) else frame.gpu_by_key(gpu) if isinstance(gpu, str) else frame.gpu(gpu)
    span = recorded_span(frame, series)
    if series is None:
        return Usage(span.window_s, 0.0, 0.0, recorded_s=span.recorded_s, window_label=span.window_label)
    gemm = [r for r in frame.stress_results if r.gpu_uuid == series.meta.uuid and r.unit == "TFLOP/s"
            and r.workload == "gemm" and not r.errors and r.device != "sim"]
    measured = max(gemm, key=lambda r: r.started_s).sustained_throughput if gemm else None
    # A run that gave no GEMM TFLOP/s still ran: the Costs page must not keep asking for one.
    other_runs = sum(1 for r in frame.stress_results if r.gpu_uuid == series.meta.uuid) if not gemm else 0
    used = series.vram_used_max_mib if series.vram_used_max_mib is not None else series.vram_used_mib
    serving_s = sum(job.busy_s for job in gpu_profile(frame, series, threshold_pct=busy_util_pct).jobs
                    if job.kind == INFERENCE)
    busy_s = float(busy_seconds(series, frame.processes, threshold_pct=busy_util_pct).sum())
    return Usage(window_s=span.window_s, busy_s=busy_s,
                 energy_kwh=float(energy_kwh(series).sum()), peak_vram_mib=nanmax(used), measured_tflops=measured,
                 serving_s=serving_s, stress_runs=other_runs, recorded_s=span.recorded_s,
                 window_label=span.window_label)


def compute_advice(frame: HistoryFrame, settings: config.Settings, offers: list[CloudOffer] | None = None,
                   specs: list[GpuSpec] | None = None) -> Advice:
    """The GUI's entry point: rules, profiles and costs for ``frame`` under ``settings``."""
    offers = load_cloud_offers() if offers is None else offers
    specs = load_gpu_specs() if specs is None else specs
    recs = run_rules(frame, settings.advisor, offers)
    inputs = cost_inputs_from(settings.costs)
    busy_pct = settings.advisor.busy_util_pct
    costs = tuple(compare(g.meta.name, g.meta.vram_total_mib, usage_of(frame, g, busy_util_pct=busy_pct),
                          inputs, offers=offers, specs=specs, gpu_key=g.meta.key) for g in frame.gpus)
    return Advice(frame, tuple(recs), workload_profiles(frame, threshold_pct=busy_pct), costs,
                  settings.costs.currency, settings.advisor)


def gpu_of(frame: HistoryFrame, rec: Recommendation) -> GpuSeries | None:
    """The GPU a recommendation is about, by its identity (two machines' GPUs share an index), else by index."""
    if rec.gpu_key is not None:
        return frame.gpu_by_key(rec.gpu_key)
    return frame.gpu(rec.gpu_index) if rec.gpu_index is not None else None


def open_history(db: str | Path) -> Any:
    """The history store at ``db``, read-only; a clear UserError when there is none."""
    from desktop.history.store import HistoryStore

    path = Path(db)
    if not path.exists():
        hint = f"`rigscope demo` writes a simulated week you can try it on: then `--db {demo_db_path()}`"
        raise UserError(f"no history at {path}: record some with `rigscope record` (or keep the window open); "
                        f"{hint}")
    return HistoryStore.open(path, readonly=True)


def _no_gpu_samples(store: Any) -> str:
    """Why a history has no GPU sample to advise on: nothing recorded yet, or only the host, with NVML's reason."""
    unavailable = store.events(0.0, math.inf, ["gpu_unavailable"])
    if unavailable:
        return (f"the history at {store.path} holds no GPU samples: no GPU could be read while it was recorded "
                f"({printable(unavailable[-1].detail)}), so only the host was recorded; advice needs the GPU's")
    return (f"the history at {store.path} has no samples yet: record some with `rigscope record`, "
            f"or try `rigscope demo` and then `--db {demo_db_path()}`")


def load_recent_frame(store: Any, days: float, now_s: float | None = None) -> HistoryFrame:
    """The last ``days`` of recorded history (ending at the newest sample, so an old database still works)."""
    from desktop.history.frames import load_frame

    span = store.time_range()
    if span is None:
        raise UserError(_no_gpu_samples(store))
    end_s = min(span[1], now_s if now_s is not None else time.time())
    end_s = max(end_s, span[0] + 1.0)
    frame = load_frame(store, end_s - days * 86400.0, end_s, platform=sys.platform)
    # Named for what advice and costs say of it: "from 34 recorded minutes of the last 7 days".
    return dataclasses.replace(frame, label=f"the last {span_text(days * 86400.0)}")


def json_safe(value: Any) -> Any:
    """``value`` with NaN/inf as None and tuples as lists, ready for ``json.dumps``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def recommendation_dict(rec: Recommendation) -> dict[str, Any]:
    data: dict[str, Any] = json_safe(dataclasses.asdict(rec))
    data["evidence"] = [{"label": e.label, "value": json_safe(e.value), "unit": e.unit, "text": e.text()}
                        for e in rec.evidence]
    return data


def advice_json(advice: Advice) -> dict[str, Any]:
    return {
        "start_s": advice.frame.start_s, "end_s": advice.frame.end_s, "demo": advice.frame.demo,
        "platform": advice.frame.platform,
        "recommendations": [recommendation_dict(r) for r in advice.recommendations],
        "profiles": [json_safe({"gpu_index": p.gpu_index, "gpu_key": p.gpu_key, "busy_hours": p.busy_s / 3600.0,
                                "shares": p.shares, "idle_share": p.idle_share, "reasons": p.reasons})
                     for p in advice.profiles],
        "costs": [json_safe(dataclasses.asdict(c)) for c in advice.costs],
        "currency": advice.currency,
        # How much history the advice judges from, and the sentence saying it is not enough (else null).
        "recorded_s": advice.recorded_s, "busy_s": advice.busy_s, "needed_s": advice.needed_s,
        "window": advice.frame.label, "recorded_text": advice.span.text(),
        "shortfall": advice.shortfall(),
    }


@dataclass(frozen=True)
class VerdictAdvice:
    """The action a stress verdict or a log's verdict gives at once, and the evidence it rests on."""

    action: str
    evidence: str


def gpu_meta_for(name: str | None, index: int = 0, *, is_laptop: bool | None = None,
                 power_limit_settable: bool | None = None, power_limit_w: float | None = None) -> GpuMeta:
    """What the action texts need to know of a GPU named in a log or a run (a laptop by its name when not known)."""
    label = name or ""
    laptop = is_laptop if is_laptop is not None else "laptop" in label.lower()
    return GpuMeta(index=index, uuid="", name=label, power_limit_w=power_limit_w,
                   power_limit_settable=power_limit_settable, is_laptop=laptop)


def verdict_advice(verdict: Any, meta: GpuMeta, platform: str = sys.platform) -> VerdictAdvice | None:
    """The action for a throttled verdict (stress run, `analyze`), from the rules' own action texts, with the
    shares under load it rests on: "SW thermal slowdown 68 % of 18 minutes under load". None when not throttled."""
    from advisor.causes import CAUSE_LABELS

    if not verdict.throttled:
        return None
    action = throttle_action(verdict.cause_family, meta, platform)
    if action is None:
        return None
    shares = sorted(((share, cause) for cause, share in verdict.cause_shares.items() if share >= 0.005),
                    reverse=True)
    parts = [f"{CAUSE_LABELS.get(cause, cause)} {share * 100:.0f} %" for share, cause in shares]
    load = f" of {span_text(verdict.load_s)} under load" if verdict.load_s > 0 else ""
    evidence = ", ".join(parts) + load if parts else f"throttled{load}"
    if verdict.onset_temperature_c is not None and verdict.cause_family == "thermal":
        evidence += f"; at {verdict.onset_temperature_c:.0f} °C"
    return VerdictAdvice(action, evidence)
