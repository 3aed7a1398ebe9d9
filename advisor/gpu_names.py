"""GPU names a user types (``analyze --gpu "H100 PCIe"``) matched to the datasheet's, with close matches for a typo.

Pure Python, for the CLI: a log without a limit column or a name is judged against the datasheet
power limit of the GPU the user names (``power_cap.DATASHEET_POWER_LIMIT_W``). The names are the
ones NVML and nvidia-smi report; the "NVIDIA " and "NVIDIA GeForce " prefixes may be left out.
"""

from __future__ import annotations

import difflib

from advisor.power_cap import DATASHEET_POWER_LIMIT_W

#: How a word of a datasheet key is written in the name the driver reports (the rest upper case).
_WORDS = {"nvidia": "NVIDIA", "geforce": "GeForce", "ada": "Ada", "generation": "Generation", "tesla": "Tesla",
          "pcie": "PCIe", "ti": "Ti"}
_PREFIXES = ("", "nvidia ", "nvidia geforce ")


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def display_name(key: str) -> str:
    """``"nvidia geforce rtx 4090"`` -> ``"NVIDIA GeForce RTX 4090"``."""
    return " ".join(_WORDS.get(word, word.upper()) for word in key.split())


def datasheet_names() -> list[str]:
    """Every GPU the datasheet table knows, as the driver names it."""
    return sorted(display_name(key) for key in DATASHEET_POWER_LIMIT_W)


def resolve_datasheet_name(text: str) -> str | None:
    """The datasheet's name for ``text`` (any case and spacing, "NVIDIA "/"NVIDIA GeForce " optional), else None."""
    key = _key(text)
    for prefix in _PREFIXES:
        if prefix + key in DATASHEET_POWER_LIMIT_W:
            return display_name(prefix + key)
    return None


def close_datasheet_names(text: str, count: int = 3) -> list[str]:
    """Up to ``count`` datasheet names close to ``text``, the closest first."""
    key = _key(text)
    scored: dict[str, float] = {}
    for known in DATASHEET_POWER_LIMIT_W:
        for prefix in _PREFIXES:
            if known.startswith(prefix):
                ratio = difflib.SequenceMatcher(None, key, known.removeprefix(prefix)).ratio()
                scored[known] = max(scored.get(known, 0.0), ratio)
    best = sorted((k for k, r in scored.items() if r >= 0.6), key=lambda k: (-scored[k], k))
    return [display_name(k) for k in best[:count]]
