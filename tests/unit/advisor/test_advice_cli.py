"""`rigscope advise` over a real history database, and the price/spec tables it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop import cli
from desktop.advice import load_cloud_offers, load_gpu_specs, table_path
from desktop.paths import config_dir, resource_path
from tests.unit.advisor.demo_db import stored_demo_week
from tests.unit.advisor.test_demo_week import EXPECTED


@pytest.fixture
def demo_db() -> Path:
    return stored_demo_week()


def test_advise_json_over_the_stored_demo_week(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["advise", "--db", str(demo_db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["demo"] is True
    # the week `rigscope demo` stored, read back as minute rollups: the same advice as the in-memory frame
    assert sorted(r["rule_id"] for r in data["recommendations"]) == sorted(EXPECTED)
    cost = data["costs"][0]
    assert cost["local_spec"]["model"] == "RTX 4090 Laptop"
    # 68 busy hours a week (utilization above 10 %: the serving minutes between requests are idle)
    assert cost["busy_hours_month"] == pytest.approx(68 * 30 / 7, rel=0.05)


def test_advise_text(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["advise", "--db", str(demo_db)]) == 0
    out = capsys.readouterr().out
    assert "[demo data" in out and "[WARNING]" in out and "Action:" in out and "Costs, " in out


def test_advise_without_history_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["advise"]) == 2
    err = capsys.readouterr().err
    assert "no history at" in err and "rigscope demo" in err and "Traceback" not in err


def test_shipped_tables_parse_and_user_copy_overrides() -> None:
    offers = load_cloud_offers()
    assert any(o.gpu_model == "RTX 4090" and o.provider == "RunPod" and o.spot_usd_h == 0.34 for o in offers)
    assert all(o.source and o.date for o in offers)
    specs = {s.model: s for s in load_gpu_specs()}
    assert specs["RTX 4090 Laptop"].peak_bf16_tflops == 76
    assert table_path("cloud_prices.csv") == resource_path("cloud_prices.csv")
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "cloud_prices.csv").write_text(
        "provider,gpu_model,vram_gb,on_demand_usd_h,spot_usd_h,source,date\nMine,RTX 4090,24,0.5,,me,2026-11\n")
    assert [o.provider for o in load_cloud_offers()] == ["Mine"]


def test_a_broken_user_table_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.errors import UserError

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "cloud_prices.csv").write_text(
        "provider,gpu_model,vram_gb,on_demand_usd_h,spot_usd_h,source,date\nMine,RTX 4090,24,cheap,,me,2026\n")
    with pytest.raises(UserError, match=r"line 2: on_demand_usd_h must be a number"):
        load_cloud_offers()
