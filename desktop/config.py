"""Settings: typed, validated, stored as TOML in the platform config directory.

``Settings`` is a tree of frozen dataclasses. ``validate`` returns every problem as
(``"section.key"``, message) so the settings dialog can show each beside its field;
``load`` never raises for a bad file (it reports and keeps defaults for what is wrong);
``save`` writes atomically, so a crash never leaves a half-written file.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

from advisor.thresholds import DEFAULT_GUARD_OFFSET_C, DEFAULT_MIN_PAUSE_S, DEFAULT_MIN_RUN_S, DEFAULT_RESUME_OFFSET_C
from advisor.thresholds import Thresholds as AdvisorSettings
from desktop.paths import config_file, ensure_private_dir
from desktop.safeio import FileRefused, read_bounded

Theme = Literal["system", "dark", "light"]


@dataclass(frozen=True)
class SamplingSettings:
    interval_s: float = 1.0
    process_interval_s: float = 5.0


@dataclass(frozen=True)
class RetentionSettings:
    raw_days: int = 14
    minute_days: int = 365
    #: 0 keeps hourly aggregates forever.
    hour_days: int = 0


@dataclass(frozen=True)
class AlertSettings:
    temperature_c: float = 85.0
    vram_pct: float = 95.0
    throttle_s: float = 30.0
    gpu_lost: bool = True
    #: Minimum time between two notifications of the same alert on the same GPU.
    debounce_s: float = 60.0


@dataclass(frozen=True)
class AppearanceSettings:
    theme: Theme = "system"


@dataclass(frozen=True)
class CostSettings:
    electricity_price_per_kwh: float = 0.17
    currency: str = "USD"
    #: Purchase price of the workstation (or its GPU share); 0 = not set.
    purchase_price: float = 0.0
    amortisation_months: int = 36


@dataclass(frozen=True)
class StressSettings:
    default_minutes: float = 10.0
    #: The guard stops a test at the GPU's slowdown temperature plus this.
    guard_offset_c: float = DEFAULT_GUARD_OFFSET_C
    #: An absolute guard temperature overriding the offset (0 = use the offset).
    guard_temperature_c: float = 0.0


@dataclass(frozen=True)
class JobSettings:
    """`rigscope run`'s thermal guard (--guard-c): where it lets the job run again, and how often it may switch."""

    #: The job continues once the GPU is this far below the guard temperature.
    guard_resume_offset_c: float = DEFAULT_RESUME_OFFSET_C
    #: A pause lasts at least this long, and the job runs at least this long after a resume.
    guard_min_pause_s: float = DEFAULT_MIN_PAUSE_S
    guard_min_run_s: float = DEFAULT_MIN_RUN_S


@dataclass(frozen=True)
class StartupSettings:
    start_at_login: bool = False


@dataclass(frozen=True)
class FleetSettings:
    """`rigscope fleet` (and later the Fleet page): the Prometheus server that scrapes the team's machines.

    Secrets only by reference: a file holding the token or the password (read when used), or the
    environment (RIGSCOPE_FLEET_TOKEN, RIGSCOPE_FLEET_USER and RIGSCOPE_FLEET_PASSWORD), never the secret here."""

    #: The server's base URL, e.g. http://prometheus:9090 ("" = not set: the Fleet is off).
    url: str = ""
    timeout_s: float = 5.0
    tls_verify: bool = True
    #: A CA bundle to verify the server's certificate against ("" = the system's).
    ca_file: str = ""
    #: Basic auth: the user, and a file holding the password.
    user: str = ""
    password_file: str = ""
    #: A file holding a bearer token.
    token_file: str = ""


@dataclass(frozen=True)
class Settings:
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    appearance: AppearanceSettings = field(default_factory=AppearanceSettings)
    costs: CostSettings = field(default_factory=CostSettings)
    stress: StressSettings = field(default_factory=StressSettings)
    jobs: JobSettings = field(default_factory=JobSettings)
    startup: StartupSettings = field(default_factory=StartupSettings)
    advisor: AdvisorSettings = field(default_factory=AdvisorSettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)


#: The one allowed range (seconds, inclusive) for the sampling interval: Settings, its field, and
#: ``--interval`` of ``record``, ``sample``, ``serve`` and ``export --prometheus`` all use it.
INTERVAL_RANGE_S: tuple[float, float] = (0.1, 60.0)

#: Where the Prometheus endpoint listens unless ``--listen`` says otherwise (``desktop.exporter``, the CLI's
#: option): only this machine can reach it.
DEFAULT_LISTEN = "127.0.0.1:9835"

#: The longest stress test accepted (a day): ``--minutes`` and the Settings' default length.
MAX_STRESS_MINUTES = 24 * 60.0

#: Allowed ranges (inclusive) for numeric settings; anything else numeric must be >= 0.
_RANGES: dict[str, tuple[float, float]] = {
    "sampling.interval_s": INTERVAL_RANGE_S,
    "sampling.process_interval_s": (0.5, 600.0),
    "retention.raw_days": (1, 3650),
    "retention.minute_days": (1, 36500),
    "retention.hour_days": (0, 36500),
    "alerts.temperature_c": (30.0, 120.0),
    "alerts.vram_pct": (1.0, 100.0),
    "alerts.throttle_s": (1.0, 86400.0),
    "alerts.debounce_s": (0.0, 86400.0),
    "costs.electricity_price_per_kwh": (0.0, 10.0),
    "costs.purchase_price": (0.0, 10_000_000.0),
    "costs.amortisation_months": (1, 240),
    "stress.default_minutes": (0.05, MAX_STRESS_MINUTES),
    "stress.guard_offset_c": (0.0, 30.0),
    "stress.guard_temperature_c": (0.0, 120.0),
    "jobs.guard_resume_offset_c": (1.0, 30.0),
    "jobs.guard_min_pause_s": (0.0, 3600.0),
    "jobs.guard_min_run_s": (0.0, 3600.0),
    "advisor.busy_util_pct": (0.0, 99.0),
    "advisor.pcie_low_share_pct": (1.0, 100.0),
    "advisor.hollow_util_pct": (1.0, 100.0),
    "advisor.low_effective_load_pct": (1.0, 100.0),
    "advisor.low_effective_share_pct": (1.0, 100.0),
    "fleet.timeout_s": (0.1, 300.0),
}

#: Text settings other than the short default (non-empty, at most 16 characters: a currency): key ->
#: (the longest accepted, whether "" is accepted as "not set").
_TEXT_LIMITS: dict[str, tuple[int, bool]] = {
    "fleet.url": (2048, True),
    "fleet.ca_file": (4096, True),
    "fleet.user": (256, True),
    "fleet.password_file": (4096, True),
    "fleet.token_file": (4096, True),
}

SettingsProblem = tuple[str, str]

#: A settings file is a few hundred bytes; anything past this is not one (and is not read whole).
MAX_FILE_BYTES = 1 << 20


def allowed_range(key: str) -> tuple[float, float]:
    """The inclusive range a numeric setting ("section.name") accepts (the Settings page's editors use it)."""
    return _RANGES.get(key, (0.0, math.inf))


def _range_problem(key: str) -> str:
    low, high = _RANGES.get(key, (0.0, math.inf))
    return f"must be between {low:g} and {high:g}" if math.isfinite(high) else f"must be at least {low:g}"


def _text_problem(value: str) -> str | None:
    """Why ``value`` cannot be a text setting: bytes that were not UTF-8, or control characters
    (a newline or ESC would end up in the TOML file, the terminal and the window as markup)."""
    for char in value:
        category = unicodedata.category(char)
        if category == "Cs":  # a lone surrogate: load() decodes invalid UTF-8 bytes to these
            return "is not valid UTF-8 text"
        if category in ("Cc", "Cf"):
            return f"must not contain control characters (U+{ord(char):04X})"
    return None


def _coerce(key: str, kind: Any, value: Any) -> tuple[Any, str | None]:
    """Convert a raw (TOML or text-field) value to ``kind``, or say why it cannot be."""
    if get_args(kind) and all(isinstance(a, str) for a in get_args(kind)):  # a Literal of strings
        choices = get_args(kind)
        return (value, None) if value in choices else (None, f"must be one of {', '.join(choices)}")
    if kind is bool:
        if isinstance(value, bool):
            return value, None
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1"), None
        return None, "must be true or false"
    if kind in (int, float):
        if isinstance(value, bool):
            return None, "must be a number"
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float (a 400-digit number): out of any range
            return None, _range_problem(key)
        except (TypeError, ValueError):
            return None, "must be a number"
        if not math.isfinite(number):
            return None, "must be a finite number"
        if kind is int:
            if number != int(number):
                return None, "must be a whole number"
            number = int(number)
        low, high = _RANGES.get(key, (0.0, math.inf))
        if not low <= number <= high:
            return None, _range_problem(key)
        return number, None
    if kind is str:
        if isinstance(value, str) and (problem := _text_problem(value)) is not None:
            return None, problem
        longest, may_be_empty = _TEXT_LIMITS.get(key, (16, False))
        if not isinstance(value, str) or not (value.strip() or may_be_empty):
            return None, "must not be empty" if not may_be_empty else "must be text"
        if len(value) > longest:
            return None, f"must be at most {longest} characters"
        return value.strip(), None
    return None, "unsupported setting"


def from_mapping(data: dict[str, Any], base: Settings | None = None) -> tuple[Settings, list[SettingsProblem]]:
    """Apply ``{"section": {"key": value}}`` on ``base``; problems keep the base value."""
    base = base or Settings()
    problems: list[SettingsProblem] = []
    sections: dict[str, Any] = {}
    section_types = get_type_hints(Settings)
    for name, section_value in data.items():
        if name not in section_types:
            problems.append((name, f"unknown section [{name}]"))
            continue
        if not isinstance(section_value, dict):
            problems.append((name, f"[{name}] must be a table"))
            continue
        current = getattr(base, name)
        hints = get_type_hints(type(current))
        changes: dict[str, Any] = {}
        for key, raw in section_value.items():
            full = f"{name}.{key}"
            if key not in hints:
                problems.append((full, "unknown setting"))
                continue
            value, error = _coerce(full, hints[key], raw)
            if error:
                problems.append((full, error))
            else:
                changes[key] = value
        sections[name] = dataclasses.replace(current, **changes)
    settings = dataclasses.replace(base, **sections)
    cross = cross_checks(settings)
    if cross:  # keep the base value of a section whose values contradict each other
        problems.extend(cross)
        revert = {key.split(".")[0] for key, _ in cross}
        settings = dataclasses.replace(settings, **{k: getattr(base, k) for k in revert})
    return settings, problems


def cross_checks(settings: Settings) -> list[SettingsProblem]:
    """Rules that tie two settings together."""
    problems = []
    if settings.retention.minute_days < settings.retention.raw_days:
        problems.append(("retention.minute_days", "must be at least the raw retention"))
    if settings.sampling.process_interval_s < settings.sampling.interval_s:
        problems.append(("sampling.process_interval_s", "must be at least the sampling interval"))
    return problems


def validate(data: dict[str, Any], base: Settings | None = None) -> tuple[Settings | None, list[SettingsProblem]]:
    """All-or-nothing: the new settings when every value is valid, else None and the problems."""
    settings, problems = from_mapping(data, base)
    return (None, problems) if problems else (settings, [])


def to_mapping(settings: Settings) -> dict[str, dict[str, Any]]:
    return {f.name: dataclasses.asdict(getattr(settings, f.name)) for f in dataclasses.fields(settings)}


def load(path: Path | None = None) -> tuple[Settings, list[SettingsProblem]]:
    """Settings from ``path`` (default: the platform config file); never raises for bad content."""
    path = path or config_file()
    try:  # a FIFO or /dev/zero as the settings file must neither hang nor fill memory
        raw = read_bounded(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return Settings(), []
    except FileRefused as exc:
        return Settings(), [("file", f"{exc}; using defaults")]
    except OSError as exc:
        return Settings(), [("file", f"cannot read {path}: {exc.strerror or exc}; using defaults")]
    # Bytes that are not UTF-8 become lone surrogates: inside a value, that value alone is refused
    # (``_text_problem``); anywhere else the parser refuses the file.
    text = raw.decode("utf-8", "surrogateescape")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Settings(), [("file", f"{path} is not valid TOML ({exc}); using defaults")]
    except (ValueError, RecursionError) as exc:  # a number past Python's digit limit, arrays nested too deep
        return Settings(), [("file", f"{path} cannot be read as settings ({exc}); using defaults")]
    return from_mapping(data)


def _toml_value(value: Any) -> str:
    """A TOML literal for any value a setting can hold, valid even for a string that ``validate``
    would refuse (a Settings made in code): ``load`` then reports that value, not the whole file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):  # past ~1000 digits str() raises (and no setting allows it): load reports inf
        return str(value) if value.bit_length() < 3000 else ("inf" if value > 0 else "-inf")
    if isinstance(value, float):
        return repr(value)  # inf, -inf and nan are TOML too
    out = ['"']
    for char in str(value):
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif unicodedata.category(char) == "Cc":
            out.append(f"\\u{ord(char):04x}")
        elif unicodedata.category(char) == "Cs":  # not encodable, not escapable in TOML
            out.append("\ufffd")
        else:
            out.append(char)
    return "".join(out) + '"'


def dumps(settings: Settings) -> str:
    lines = ["# Rigscope settings. Edit in the app (Settings) or here; invalid values are reported."]
    for section, values in to_mapping(settings).items():
        lines.append(f"\n[{section}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in values.items())
    return "\n".join(lines) + "\n"


def save(settings: Settings, path: Path | None = None) -> None:
    """Write atomically (temp file + rename): a crash leaves the old file or the new one."""
    path = path or config_file()
    ensure_private_dir(path.parent)  # 0700 when created here; an existing folder keeps its mode
    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps(settings))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
