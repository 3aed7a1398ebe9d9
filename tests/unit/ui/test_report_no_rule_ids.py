"""The History page's and exported report's recommendations read as sentences (issue 26): no rule id
such as ``(thermal_throttling)`` and no literal backticks; a `command` is shown as code."""

from __future__ import annotations

from types import SimpleNamespace

from advisor.rules.base import Evidence, Recommendation
from desktop.ui.report.report_html import code_spans, e


def test_code_marks_become_code_and_stay_escaped() -> None:
    assert code_spans(e("run `nvidia-smi -lgc 0,1800` <now>")) == "run <code>nvidia-smi -lgc 0,1800</code> &lt;now&gt;"
    assert code_spans(e("no code here")) == "no code here"


def test_the_recommendations_section_shows_no_rule_id_and_no_backticks() -> None:
    from desktop.ui.report import report_html

    rec = Recommendation(rule_id="thermal_throttling", severity="warning", title="GPU 0 throttled",
                         evidence=(Evidence("Time throttled", 12.0, "%"),),
                         action="Set the fan mode: `sudo msi-ec fan_mode advanced`")
    data = SimpleNamespace(summary=SimpleNamespace(recommendations=[rec]))
    html = report_html._recommendations(data, report_html.PAPER)  # type: ignore[arg-type]
    assert "thermal_throttling" not in html and "`" not in html
    assert "<code>sudo msi-ec fan_mode advanced</code>" in html
