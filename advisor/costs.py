"""Own vs rent: what the logged work costs on the local GPU and what it would cost in the cloud.

Inputs are parsed rows (the desktop layer reads the shipped CSV tables) and measured usage.
Model, per month (30 days):
  owned   = purchase_price / amortisation_months + energy_kwh * electricity_price
  rented  = cloud_hours * price_per_hour,
            cloud_hours = (busy_hours - serving_hours) / relative_speed + serving_hours
  relative_speed = cloud TFLOP/s / local TFLOP/s (peak dense bf16; when a stress result gives
                   the local sustained figure, the cloud peak is scaled by CLOUD_EFFICIENCY so
                   that measured is compared with a realistic, not a datasheet, number)
  break-even busy hours/month: where owned = rented, F / (rent_per_busy_hour - energy_per_busy_hour)
Training-like work is assumed compute-bound (a faster GPU finishes it in fewer hours); busy
time that looks like inference serving must stay up as long as it does locally, so it is
priced per wall hour whatever the speed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from advisor.span import MONTH_S as MONTH_S  # noqa: PLC0414 (re-exported: the month of every monthly figure)
from advisor.span import RecordedSpan
from advisor.wording import duration_text, parenthesized

#: Share of datasheet peak a large bf16 GEMM reaches on data-centre GPUs (H100: ~795 of 989 TFLOP/s).
CLOUD_EFFICIENCY = 0.80


@dataclass(frozen=True)
class CloudOffer:
    """One row of the cloud price table (US$ per GPU-hour)."""

    provider: str
    gpu_model: str
    vram_gb: float
    on_demand_usd_h: float
    spot_usd_h: float | None
    source: str
    date: str


@dataclass(frozen=True)
class GpuSpec:
    """One row of the GPU spec table."""

    model: str
    peak_bf16_tflops: float
    vram_gb: float
    #: The TGP (W) the peak is stated at, where the datasheet names one (laptop GPUs); see advisor.dense_peak.
    peak_at_w: float | None = None


@dataclass(frozen=True)
class Usage:
    """Measured use of one local GPU over some window of history."""

    #: The window's length (an ISO week, the last 7 days).
    window_s: float
    busy_s: float
    energy_kwh: float
    peak_vram_mib: float = 0.0
    #: Sustained TFLOP/s from the latest stress result (GEMM), when there is one.
    measured_tflops: float | None = None
    #: The part of ``busy_s`` that looks like inference serving (priced per wall hour).
    serving_s: float = 0.0
    #: Stress runs of this GPU that gave no usable GEMM TFLOP/s (simulated, stopped early, another workload).
    stress_runs: int = 0
    #: The time recorded in the window (``advisor.span.recorded_span``); None: all of it.
    recorded_s: float | None = None
    #: How the window is named ("2026-W48", "the last 7 days"); "" where it has no name.
    window_label: str = ""

    @property
    def span(self) -> RecordedSpan:
        """What the monthly figures extrapolate from: the time recorded, not the window's length."""
        recorded = self.window_s if self.recorded_s is None else self.recorded_s
        return RecordedSpan(recorded, self.window_s, self.window_label)

    def per_month(self, value: float) -> float:
        return self.span.per_month(value)


@dataclass(frozen=True)
class CostInputs:
    purchase_price: float
    amortisation_months: int
    electricity_price_per_kwh: float
    currency: str = "USD"


@dataclass(frozen=True)
class CloudCost:
    offer: CloudOffer
    relative_speed: float
    cloud_hours_month: float
    on_demand_month: float
    spot_month: float | None
    #: Busy hours per month at which owning costs the same as renting on demand (None: never).
    break_even_busy_hours_month: float | None
    #: Months of renting at this usage that add up to the purchase price (None: never).
    payback_months: float | None


@dataclass(frozen=True)
class CostComparison:
    gpu_name: str
    local_spec: GpuSpec | None
    local_tflops: float | None
    busy_hours_month: float
    energy_kwh_month: float
    owned_fixed_month: float
    owned_energy_month: float
    owned_month: float
    options: tuple[CloudCost, ...]
    #: The cheapest offer with more VRAM than the local GPU, for jobs it cannot hold.
    bigger_option: CloudOffer | None
    notes: tuple[str, ...]
    #: Whether a purchase price is set: without one there is no depreciation and no break-even.
    priced: bool = True
    #: The history the monthly figures extrapolate from (seconds recorded) and the currency of the owned costs.
    history_s: float = 0.0
    currency: str = "USD"
    #: That history in words, with its window: "1.6 recorded days of 2026-W48" (``RecordedSpan.text``).
    history_text: str = ""
    #: The GPU by identity (``GpuMeta.key``): two machines' GPUs share an index and may share a name.
    gpu_key: str = ""


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def find_spec(gpu_name: str, specs: tuple[GpuSpec, ...] | list[GpuSpec]) -> GpuSpec | None:
    """The spec whose model words all appear in the GPU's name; the most specific one wins.

    "NVIDIA GeForce RTX 4090 Laptop GPU" matches "RTX 4090 Laptop" before "RTX 4090".
    """
    name = set(_tokens(gpu_name))
    best: GpuSpec | None = None
    for spec in specs:
        words = _tokens(spec.model)
        if words and all(w in name for w in words) and (best is None or len(words) > len(_tokens(best.model))):
            best = spec
    return best


def relative_speed(cloud: GpuSpec, local: GpuSpec, measured_tflops: float | None) -> float:
    if measured_tflops is not None and measured_tflops > 0:
        return cloud.peak_bf16_tflops * CLOUD_EFFICIENCY / measured_tflops
    return cloud.peak_bf16_tflops / local.peak_bf16_tflops


def smallest_fitting(offers: tuple[CloudOffer, ...] | list[CloudOffer], need_gb: float) -> CloudOffer | None:
    """The cheapest on-demand offer among the smallest VRAM size that holds ``need_gb``."""
    fitting = [o for o in offers if o.vram_gb >= need_gb]
    if not fitting:
        return None
    smallest = min(o.vram_gb for o in fitting)
    return min((o for o in fitting if o.vram_gb == smallest), key=lambda o: o.on_demand_usd_h)


def compare(gpu_name: str, vram_total_mib: float | None, usage: Usage, inputs: CostInputs, *,
            offers: tuple[CloudOffer, ...] | list[CloudOffer],
            specs: tuple[GpuSpec, ...] | list[GpuSpec], gpu_key: str = "") -> CostComparison:
    """Monthly cost of the measured work owned vs rented on each cloud offer with a known spec."""
    notes: list[str] = []
    local = find_spec(gpu_name, specs)
    busy_h = usage.per_month(usage.busy_s) / 3600.0
    serving_h = min(busy_h, usage.per_month(usage.serving_s) / 3600.0)
    kwh = usage.per_month(usage.energy_kwh)
    fixed = inputs.purchase_price / inputs.amortisation_months if inputs.amortisation_months > 0 else 0.0
    energy_cost = kwh * inputs.electricity_price_per_kwh
    if inputs.purchase_price <= 0:
        notes.append("No purchase price set (enter it on the Costs page): owning counts electricity only.")
    if serving_h > 0:
        notes.append(f"{serving_h:.0f} of the busy hours look like inference serving: priced per wall hour "
                     "(a server stays up however fast the GPU is).")
    if inputs.currency.upper() != "USD":
        notes.append(f"Cloud prices are in USD; your costs are in {inputs.currency}: convert before comparing.")
    energy_per_busy_h = kwh * inputs.electricity_price_per_kwh / busy_h if busy_h > 0 else 0.0
    local_tflops = None
    if local is None:
        notes.append(f"No spec for {gpu_name!r} in gpu_specs.csv: relative speed unknown, cloud rows omitted.")
    else:
        local_tflops = usage.measured_tflops if usage.measured_tflops else local.peak_bf16_tflops
        if usage.measured_tflops:
            notes.append(f"Local speed from your stress test ({usage.measured_tflops:.0f} TFLOP/s sustained); "
                         f"cloud GPUs at {CLOUD_EFFICIENCY:.0%} of their datasheet peak.")
        elif usage.stress_runs:
            notes.append("Relative speed from datasheet peak dense bf16 TFLOP/s: your stress test measured no "
                         "GEMM TFLOP/s on this GPU (a simulated GPU, another workload or a run stopped early).")
        else:
            notes.append("Relative speed from datasheet peak dense bf16 TFLOP/s; run a stress test to use "
                         "your GPU's measured figure.")
    options: list[CloudCost] = []
    spec_by_offer = {o.gpu_model: find_spec(o.gpu_model, specs) for o in offers}
    for offer in offers:
        cloud_spec = spec_by_offer[offer.gpu_model]
        if local is None or cloud_spec is None:
            continue
        speed = relative_speed(cloud_spec, local, usage.measured_tflops)
        hours = (busy_h - serving_h) / speed + serving_h
        rent_per_busy_h = offer.on_demand_usd_h * (hours / busy_h if busy_h > 0 else 1.0 / speed)
        margin = rent_per_busy_h - energy_per_busy_h
        # No price: nothing to break even with (0 / margin read "0 h" on one page, "-" on another).
        break_even = fixed / margin if margin > 0 and inputs.purchase_price > 0 else None
        monthly_saving = hours * offer.on_demand_usd_h - energy_cost
        payback = inputs.purchase_price / monthly_saving if monthly_saving > 0 and inputs.purchase_price > 0 else None
        options.append(CloudCost(
            offer=offer, relative_speed=speed, cloud_hours_month=hours,
            on_demand_month=hours * offer.on_demand_usd_h,
            spot_month=hours * offer.spot_usd_h if offer.spot_usd_h is not None else None,
            break_even_busy_hours_month=break_even, payback_months=payback))
    options.sort(key=lambda c: c.on_demand_month)
    bigger = None
    if vram_total_mib:
        local_gb = vram_total_mib / 1024.0
        bigger = smallest_fitting([o for o in offers if o.vram_gb > local_gb + 0.5], local_gb + 1.0)
    return CostComparison(gpu_name=gpu_name, local_spec=local, local_tflops=local_tflops, busy_hours_month=busy_h,
                          energy_kwh_month=kwh, owned_fixed_month=fixed, owned_energy_month=energy_cost,
                          owned_month=fixed + energy_cost, options=tuple(options), bigger_option=bigger,
                          notes=tuple(notes), priced=inputs.purchase_price > 0, history_s=usage.span.recorded_s,
                          currency=inputs.currency, history_text=usage.span.text(),
                          gpu_key=gpu_key)


def break_even_text(comparison: CostComparison, option: CloudCost) -> str:
    """The break-even busy hours per month as every page, report and command shows it: "293 h", "never"
    (renting per busy hour costs less than the electricity), "set a price" (no purchase price)."""
    if not comparison.priced:
        return "set a price"
    hours = option.break_even_busy_hours_month
    return "never" if hours is None else f"{hours:,.0f} h"


def _article(name: str) -> str:
    """"an RTX 4090", "an H100", "a T4": by how the first letter is read out."""
    first = name[:1].upper()
    return "an" if first in "AEFHILMNORSX" and first else "a"


def cost_answer(c: CostComparison, price_field: str = "on the Costs page") -> str:
    """One sentence: what renting the cheapest cloud GPU would cost for the measured busy hours, what owning
    costs (power, depreciation) and when owning is the cheaper; without a purchase price it asks for one, in
    ``price_field`` (the Costs page says "above", where the field is)."""
    days = c.history_text or f"{duration_text(c.history_s)} of history"
    money = f"{{:,.2f}} {c.currency}".format
    if c.busy_hours_month <= 0:
        owning = (f"owning costs {money(c.owned_fixed_month)} a month in depreciation" if c.priced
                  else "owning costs only its power")
        return f"No busy hours in {days}: nothing to rent yet, and {owning}."
    if not c.options:
        return (f"Owning costs {money(c.owned_month)} a month for your {c.busy_hours_month:,.0f} busy hours "
                f"a month (from {days}); no cloud GPU with a known speed to compare with.")
    best = c.options[0]
    offer = best.offer
    rent = (f"Renting {_article(offer.gpu_model)} {offer.gpu_model} at {offer.on_demand_usd_h:.2f} USD/h "
            f"{parenthesized(offer.provider)} would cost {best.on_demand_month:,.2f} USD a month for your "
            f"{c.busy_hours_month:,.0f} busy hours a month (from {days}, extrapolated to 30 days)")
    if not c.priced:
        return (f"{rent}; owning costs {money(c.owned_energy_month)} a month in power. Enter the purchase price "
                f"{price_field} to see when owning pays off.")
    owning = (f"owning costs {money(c.owned_energy_month)} in power and {money(c.owned_fixed_month)} in "
              "depreciation a month")
    if best.payback_months is None:
        return f"{rent}; {owning}: renting stays cheaper at this use."
    return f"{rent}; {owning}: owning is cheaper after {best.payback_months:,.0f} months."


def break_even_curve(comparison: CostComparison, option: CloudCost,
                     max_hours: float = 720.0, points: int = 25) -> tuple[list[float], list[float], list[float]]:
    """Busy hours/month -> (owned, rented) monthly cost lines for the break-even chart."""
    per_busy_h = comparison.owned_energy_month / comparison.busy_hours_month if comparison.busy_hours_month > 0 else 0.0
    hours = [max_hours * i / (points - 1) for i in range(points)]
    owned = [comparison.owned_fixed_month + h * per_busy_h for h in hours]
    cloud_per_busy_h = (option.cloud_hours_month / comparison.busy_hours_month if comparison.busy_hours_month > 0
                        else 1.0 / option.relative_speed)
    rented = [h * cloud_per_busy_h * option.offer.on_demand_usd_h for h in hours]
    return hours, owned, rented


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
