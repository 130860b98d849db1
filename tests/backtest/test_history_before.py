"""The history a forecast reads before `--from`: backtest fetches it without a wider `--from`, says
how much of it Prometheus has, and which steps of the window had no forecast.

A real Prometheus holds 50 minutes of `inflight` for Deployment web's two pods, from T0. The rule's
forecast has a 20-minute season and a 5-minute level window: it reads 25 minutes before a moment.
From T0 + 10m, Prometheus has 10 of those 25 minutes; the forecast has no value until one season
after T0 at the earliest (T0 + 20m, 10 minutes into the window) and until its level window one
season ago is whole at the latest (T0 + 25m, 15 minutes in)."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from autoscaler.backtest import cli
from kubesim.adapterrules import gauge_rule
from kubesim.prometheus import PrometheusServer, start_backfilled

from . import data

STEP = 15
MINUTES = 50
FORECAST = {"method": "seasonal", "season": "20m", "levelWindow": "5m", "horizon": "1m", "resolution": "15s"}


@pytest.fixture(scope="module")
def recent() -> Iterator[tuple[PrometheusServer, int]]:
    t0 = (int(time.time()) - 3600) // 60 * 60
    lines = data.gauge("inflight", t0, MINUTES, lambda s: 8 + s // STEP % 5)
    # calls: none for the first 10 minutes (a closed call centre), then 10
    lines += data.gauge("calls", t0, MINUTES, lambda s: 0 if s < 600 else 10)
    prom = start_backfilled("\n".join([*lines, "# EOF"]) + "\n")
    yield prom, t0
    prom.close()


def _backtest(recent, tmp_path: Path, start: int, end: int, metric: str = "inflight") -> tuple[str, dict]:
    prom, _ = recent
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"rules": [{**gauge_rule(f'{name}{{namespace!="",pod!=""}}'), "forecast": FORECAST}
                                               for name in ("inflight", "calls")]}))
    raw = data.spec("web", 60)
    raw["spec"]["metrics"] = [{"type": "Pods", "pods": {"metric": {"name": name},
                                                        "target": {"type": "AverageValue", "averageValue": "10"}}}
                              for name in (metric, f"{metric}_forecast")]
    spec = tmp_path / "web.yaml"
    spec.write_text(yaml.safe_dump(raw))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(spec), "--prometheus-url", prom.url, "--rules", str(rules), "--from", str(start),
                     "--to", str(end), "--step", f"{STEP}s", "--report", str(tmp_path / "r"), "--no-png"], out, err)
    assert code == 0, err.getvalue()
    return out.getvalue(), json.loads((tmp_path / "r" / "summary.json").read_text())["specs"][0]


def _first_value(prom: PrometheusServer, promql: str, start: int, end: int) -> int:
    """Seconds from `start` to the first step Prometheus answers `promql` with a value."""
    r = httpx.get(f"{prom.url}/api/v1/query_range", params={"query": promql, "start": start, "end": end,
                                                             "step": STEP}).json()
    times = sorted({int(float(t)) for series in r["data"]["result"] for t, _ in series["values"]})
    return times[0] - start


def test_the_forecast_s_history_before_from_and_the_steps_without_it(recent, tmp_path: Path):
    prom, t0 = recent
    start, end = t0 + 600, t0 + 2700
    out, summary = _backtest(recent, tmp_path, start, end)
    assert "fetched 25m of history before --from for the forecast of inflight_forecast " \
           "(Prometheus has 10m of it)" in out
    forecast = summary["metrics"][1]["promql"]
    first = _first_value(prom, forecast, start, end)
    assert 600 <= first <= 900 + STEP
    minutes = f"{first // 60}m" + (f"{first % 60}s" if first % 60 else "")
    assert f"web.yaml (web): inflight_forecast: no value for the first {minutes} of the window " \
           "(needs 25m of history, Prometheus had 10m before --from)" in out
    assert summary["forecastHistory"] == {
        "fetchedBefore": [{"metrics": ["inflight_forecast"], "fetchedSeconds": 1500.0, "hadSeconds": 600.0}],
        "noValue": [{"metric": "inflight_forecast", "needsSeconds": 1500.0, "noValueSeconds": float(first),
                     "noValueAtAll": False, "hadSeconds": 600.0}]}


def test_a_window_after_a_whole_season_of_history_has_every_forecast(recent, tmp_path: Path):
    _, t0 = recent
    out, summary = _backtest(recent, tmp_path, t0 + 1800, t0 + 2700)
    assert "(Prometheus has all of it)" in out and "no value" not in out
    assert summary["forecastHistory"]["noValue"] == []


def test_a_forecast_without_value_though_its_history_was_there(recent, tmp_path: Path):
    """calls: 0 for the first 10 minutes, then 10. From T0 + 25m Prometheus has the whole 25 minutes
    the forecast reads, but the level one season before (T0 .. T0 + 5m at the first step) is zero:
    no value until that window holds the 10s (after T0 + 30m), within 5 minutes and a step."""
    prom, t0 = recent
    start, end = t0 + 1500, t0 + 2700
    out, summary = _backtest(recent, tmp_path, start, end, "calls")
    first = _first_value(prom, summary["metrics"][1]["promql"], start, end)
    assert 0 < first <= 300 + STEP
    minutes = f"{first // 60}m" + (f"{first % 60}s" if first % 60 else "") if first >= 60 else f"{first}s"
    assert f"calls_forecast: no value for the first {minutes} of the window (its 25m of history were there: " \
           "the level one season before was zero or missing)" in out
