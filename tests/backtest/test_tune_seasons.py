"""`tune` explores a seasonal forecast's seasons, those the history before `--from` covers, and
fetches that history without a wider `--from`.

A real Prometheus holds 100 minutes of a per-pod gauge for Deployment web's two pods, from T0: 5
each, and 20 each for three minutes once every 30 minutes (minutes 25-27, 55-57, 85-87): a
"weekly" spike, where the rule's forecast has a 10-minute season (a "day"), a 2-minute level
window and a 1-minute horizon. The spec lists the metric and its forecast, target 5 per pod.

By hand:
- a season set is tried when the history Prometheus has before `--from` covers its shortest
  season plus the level window (a longer season falls back to a shorter one): from T0 + 20m,
  20 minutes of history: `30m,10m` (12 minutes) but not `30m` (32 minutes); from T0 + 40m both.
  The rule's own `10m` is the given setting;
- the forecasts of the seasons tried read up to 32 minutes before `--from`: that is fetched;
- the 10-minute season foresees no spike (10 minutes before one the load is flat) and foresees a
  phantom one 10 minutes after each; the 30-minute season foresees each spike one minute ahead,
  so the chosen candidate has it, and less time under-provisioned than the given spec.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from autoscaler.backtest import tunecli
from kubesim.adapterrules import gauge_rule
from kubesim.prometheus import PrometheusServer, start_backfilled

from . import data

STEP = 15
MINUTES = 100
NS = data.NS
FORECAST = {"method": "seasonal", "season": "10m", "levelWindow": "2m", "horizon": "1m", "resolution": "15s"}


def per_pod(seconds: int) -> float:
    return 20.0 if 25 <= (seconds // 60) % 30 < 28 else 5.0


@pytest.fixture(scope="module")
def weekly() -> Iterator[tuple[PrometheusServer, int]]:
    t0 = (int(time.time()) - 7200) // 60 * 60
    prom = start_backfilled("\n".join([*data.gauge("busy", t0, MINUTES, per_pod), "# EOF"]) + "\n")
    yield prom, t0
    prom.close()


def _tune(weekly, tmp_path: Path, start: int) -> tuple[str, dict]:
    prom, t0 = weekly
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(
        {"rules": [{**gauge_rule('busy{namespace!="",pod!=""}'), "forecast": FORECAST}]}))
    metrics = [{"type": "Pods", "pods": {"metric": {"name": name},
                                         "target": {"type": "AverageValue", "averageValue": "5"}}}
               for name in ("busy", "busy_forecast")]
    (tmp_path / "web.yaml").write_text(yaml.safe_dump({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web", "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 20, "metrics": metrics}}))
    out, err = io.StringIO(), io.StringIO()
    code = tunecli.main([str(tmp_path / "web.yaml"), "--prometheus-url", prom.url, "--rules",
                         str(tmp_path / "rules.yaml"), "--from", str(start), "--to", str(t0 + MINUTES * 60),
                         "--step", f"{STEP}s", "--startup-delay", "15s", "--initial-replicas", "2",
                         "--seasons", "10m", "30m", "30m,10m", "--report", str(tmp_path / "report"), "--workers", "1",
                         "--no-png"], out, err)
    assert code == 0, err.getvalue()
    return out.getvalue(), json.loads((tmp_path / "report" / "tune.json").read_text())


def test_seasons_the_history_before_from_covers_are_tried(weekly, tmp_path: Path):
    _, t0 = weekly
    out, report = _tune(weekly, tmp_path, t0 + 1200)
    assert report["seasonsTried"] == ["30m,10m"]
    assert report["fetchedBefore"] == [{"metrics": ["busy_forecast"], "fetchedSeconds": 1920.0, "hadSeconds": 1200.0}]
    assert "fetched 32m of history before --from for the forecast of busy_forecast (Prometheus has 20m of it)" in out
    tried = {row["knobs"]["forecastSeasons"] for row in report["all"]}
    assert tried == {None, "30m,10m"}
    assert report["given"]["noValue"] == []  # 20 minutes cover the rule's 10m + 2m


def test_tune_chooses_the_season_that_foresees_the_spike(weekly, tmp_path: Path):
    _, t0 = weekly
    out, report = _tune(weekly, tmp_path, t0 + 2400)
    assert report["seasonsTried"] == ["30m", "30m,10m"]
    assert "(Prometheus has all of it)" in out
    best, given = report["best"], report["given"]
    assert best["knobs"]["forecastSeasons"] in ("30m", "30m,10m")
    for part in ("chosenOn", "reportedOn"):
        assert best[part]["secondsUnderProvisioned"] < given[part]["secondsUnderProvisioned"]
    assert "rules file: set forecast.seasons to [30m" in out


@pytest.mark.parametrize(("given", "why"), [("7x", "not a duration"), ("1d,0s", "must be positive")])
def test_bad_seasons_are_one_line(given: str, why: str):
    err = io.StringIO()
    assert tunecli.main(["web.yaml", "--prometheus-url", "http://127.0.0.1:9", "--from", "now-1h",
                         "--seasons", given], io.StringIO(), err) == 2
    assert err.getvalue().count("\n") == 1 and "--seasons" in err.getvalue() and why in err.getvalue()
