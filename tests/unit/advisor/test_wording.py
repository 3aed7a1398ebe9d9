"""Counts and durations in words (issue 26): no "recommendation(s)", "stretch(es)", "GPU(s)" or "1 days"
anywhere a user reads, and the helpers that say it right."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from advisor.wording import count_text, duration_text, plural_word

ROOT = Path(__file__).resolve().parents[3]
HEDGED_PLURAL = re.compile(r"[A-Za-z]\((?:s|es)\)")


@pytest.mark.parametrize(("count", "word", "expected"), [
    (1, "recommendation", "1 recommendation"), (2, "recommendation", "2 recommendations"),
    (0, "GPU", "0 GPUs"), (1, "GPU", "1 GPU"), (3, "stretch", "3 stretches"), (1, "stretch", "1 stretch"),
    (1234, "sample", "1,234 samples"), (2, "process", "2 processes"), (1.5, "hour", "1.5 hours"),
    (1.0, "day", "1 day"),
])
def test_count_text(count: float, word: str, expected: str) -> None:
    assert count_text(count, word) == expected


def test_irregular_plurals_are_given() -> None:
    assert plural_word(2, "is", "are") == "are" and plural_word(1, "is", "are") == "is"


@pytest.mark.parametrize(("seconds", "expected"), [
    (1, "1 second"), (45, "45 seconds"), (60, "60 seconds"), (100, "2 minutes"), (300, "5 minutes"),
    (5400, "1.5 hours"), (3 * 3600, "3 hours"), (48 * 3600, "2 days"), (86400 * 6.5, "6.5 days"), (-5, "0 seconds"),
])
def test_duration_text(seconds: float, expected: str) -> None:
    assert duration_text(seconds) == expected


def _user_strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module (f-string parts included), docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_message_hedges_a_plural() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}"
             for package in ("desktop", "advisor") for path in sorted((ROOT / package).rglob("*.py"))
             for line, text in _user_strings(path) if HEDGED_PLURAL.search(text)]
    assert found == [], "say it with advisor.wording.count_text:\n" + "\n".join(found)


def test_the_check_finds_a_hedged_plural(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""A module of frame(s)."""\nx = 2\nMESSAGE = f"{x} GPU(s) and 3 stretch(es)"\n')
    assert [text for _, text in _user_strings(module) if HEDGED_PLURAL.search(text)] == [" GPU(s) and 3 stretch(es)"]
