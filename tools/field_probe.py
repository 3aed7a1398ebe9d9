"""Raw NVML field probe for tools/device_run.sh: return code, type and value of each field id asked.

``python3 tools/field_probe.py OUT.json [--phase before|after] [--simulate]`` asks
``nvmlDeviceGetFieldValues`` of GPU 0 for the ids a first real run should settle (74/75 and
251-253 vs 269-271 for the per-cause throttle counters, 82 energy, 185/186, 193-198, ...) one id
per entry, and writes ``{"simulated", "phase", "driver", "binding", "gpu", "fields": [{"id",
"return", "type", "value"}]}``. ``--simulate`` asks the fake driver of tests/fakes instead (a
desktop GPU) and says so in ``simulated``: the same shape, nothing real. Exit 2 with one line
where NVML or the binding is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The ids probed: 74, 75, 82, 185, 186, 193-198 and 251-273.
FIELD_IDS = (74, 75, 82, 185, 186, *range(193, 199), *range(251, 274))
# nvmlValueType_t -> the c_nvmlValue_t member holding it.
_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _binding_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        return "unknown"


def probe(pynvml: Any, *, simulated: bool, phase: str) -> dict[str, Any]:
    """One field value per id from GPU 0 (asked one at a time so an unknown id fails alone)."""
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        fields: list[dict[str, Any]] = []
        for fid in FIELD_IDS:
            entry: dict[str, Any] = {"id": fid}
            try:
                (value,) = pynvml.nvmlDeviceGetFieldValues(handle, [fid])
                entry["return"] = int(value.nvmlReturn)
                entry["type"] = int(value.valueType)
                member = _MEMBERS.get(entry["type"])
                entry["value"] = getattr(value.value, member) if member and entry["return"] == 0 else None
                entry["timestamp_us"] = int(value.timestamp)
            except Exception as exc:  # the probe records whatever the driver answers
                entry.update({"return": None, "type": None, "value": None, "error": f"{type(exc).__name__}: {exc}"})
            fields.append(entry)
        return {"simulated": simulated, "phase": phase,
                "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
                "binding": "fake (tests/fakes)" if simulated else _binding_version(),
                "gpu": _text(pynvml.nvmlDeviceGetName(handle)), "fields": fields}
    finally:
        pynvml.nvmlShutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="field_probe", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="the JSON file to write")
    parser.add_argument("--phase", default="before", help="a label kept in the file (before, after)")
    parser.add_argument("--simulate", action="store_true", help="probe the fake driver of tests/fakes instead")
    args = parser.parse_args(argv)
    try:
        if args.simulate:
            sys.path.insert(0, str(REPO_ROOT))
            from tests.fakes.fake_pynvml import FakeNvml, desktop_gpu

            module: Any = FakeNvml([desktop_gpu()]).module
        else:
            import pynvml

            module = pynvml
        result = probe(module, simulated=args.simulate, phase=args.phase)
    except Exception as exc:  # one line, never a traceback, on a lent machine
        print(f"field-probe: {type(exc).__name__}: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    answered = sum(1 for f in result["fields"] if f["return"] == 0)
    print(f"field-probe ({args.phase}): {answered} of {len(FIELD_IDS)} ids answered -> {args.out}")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
