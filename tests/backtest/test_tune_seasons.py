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
  so the chosen candidate has it, and less time under-provisioned than the given spec;
- a season set the history before `--from` does not cover is never fetched: from T0 + 20m no
  range query reads the 30-minute season alone (its term reads `offset 1800s`, the 10-minute
  one's `offset 600s`), and tune answers exactly what it answers when that set is not asked for.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_api_client import PrometheusConnect

from autoscaler.backtest import tunecli
from autoscaler.backtest.tune import SHAPES
from kubesim.adapterrules import gauge_rule
from kubesim.prometheus import PrometheusServer, start_backfilled
from tests.support import prometheus_requests

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


SEASON_SETS = ("10m", "30m", "30m,10m")
RANGE = "/api/v1/query_range"  # Prometheus' handler of range queries


def _tune(weekly, tmp_path: Path, start: int, seasons: tuple[str, ...] = SEASON_SETS) -> tuple[str, dict]:
    prom, t0 = weekly
    tmp_path.mkdir(exist_ok=True)
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
                         "--seasons", *seasons, "--report", str(tmp_path / "report"), "--workers", "1",
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
    # the shapes against noise, at the rule's horizon, with each season set tried
    shapes = {(row["knobs"]["forecastSeasons"], row["knobs"]["forecastShape"]) for row in report["all"]}
    assert shapes >= {(p, s) for p in (None, "30m,10m") for s in (None, *SHAPES)}
    assert all(row["knobs"]["forecastHorizon"] is None for row in report["all"] if row["knobs"]["forecastShape"])
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


def test_season_sets_the_history_does_not_cover_are_not_fetched(weekly, tmp_path: Path, monkeypatch):
    prom, t0 = weekly
    start = t0 + 1200
    history = (start - t0) // 60  # minutes Prometheus has before --from
    level_window = 2              # FORECAST's; a gauge read as it is has no lookback
    shortest = {s: min(int(p.removesuffix("m")) for p in s.split(",")) for s in SEASON_SETS}
    uncovered = {s for s, p in shortest.items() if p + level_window > history}
    assert uncovered == {"30m"}
    sent: list[str] = []
    ask = PrometheusConnect.custom_query_range

    def spy(self, query, *args, **kwargs):
        sent.append(query)
        return ask(self, query, *args, **kwargs)

    monkeypatch.setattr(PrometheusConnect, "custom_query_range", spy)
    before = prometheus_requests(prom.url, RANGE)
    out, report = _tune(weekly, tmp_path / "asked", start)
    assert prometheus_requests(prom.url, RANGE) - before == len(sent)  # the spy saw every range query answered

    def seasons_read(query: str) -> set[str]:  # each season's term reads its level window `offset P` back
        return {f"{p}m" for p in (10, 30) if re.search(rf"offset {p * 60}s\b", query)}
    reads = [seasons_read(q) for q in sent]
    assert {"10m", "30m"} in reads  # the covered 30m,10m is fetched (and told apart)
    for s in uncovered:
        assert set(s.split(",")) not in reads, f"{s}: fetched without history to answer"

    asked = tuple(s for s in SEASON_SETS if s not in uncovered)
    unasked_out, unasked = _tune(weekly, tmp_path / "unasked", start, asked)
    for r in (report, unasked):
        r.pop("seconds")
    assert report == unasked
    assert (tmp_path / "asked" / "report" / "recommended.yaml").read_text() == \
        (tmp_path / "unasked" / "report" / "recommended.yaml").read_text()

    def words(text: str) -> str:  # but the last line's timings and report path
        return text[:text.rindex("\nfetched in ")]
    assert words(out) == words(unasked_out)


@pytest.mark.parametrize(("given", "why"), [("7x", "not a duration"), ("1d,0s", "must be positive")])
def test_bad_seasons_are_one_line(given: str, why: str):
    err = io.StringIO()
    assert tunecli.main(["web.yaml", "--prometheus-url", "http://127.0.0.1:9", "--from", "now-1h",
                         "--seasons", given], io.StringIO(), err) == 2
    assert err.getvalue().count("\n") == 1 and "--seasons" in err.getvalue() and why in err.getvalue()
