"""Same history, same answer (issue 35): one trace backfilled at three places in time, shifted by
7.3 s and by 1 h 11 s, gives backtest the same figures and tune the same recommendation.

A real Prometheus holds the trace three times, one namespace each: 100 minutes of a per-pod gauge
for Deployment web's two pods, 15 s apart, that changes at every sample (5, 6, 7, 5...) and is 20
for three minutes once every 30 (minutes 25-27, 55-57, 85-87). The rule's seasonal forecast reads
it at a 60 s resolution: a subquery Prometheus evaluates at the absolute multiples of 60 s, so
which sample it reads depends on where the trace falls against that grid, unless every query is
evaluated on the history's own grid. Each run's `--from` and `--to` are its trace's, shifted
alike; `--from` 7.3 s after a whole second was also sent rounded, one sample early.

The expected answer is the unshifted trace's: nothing of the trace moved but its place in time.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from autoscaler.backtest import align, cli, tunecli
from kubesim.adapterrules import gauge_rule
from kubesim.prometheus import PrometheusServer, start_backfilled
from kubesim.victoriametrics import VictoriaMetricsServer

from . import data

STEP = 15
MINUTES = 100
SHIFTS = {"a": 0.0, "b": 7.3, "c": 3611.0}  # namespace: seconds after the first trace
FORECAST = {"method": "seasonal", "season": "10m", "levelWindow": "2m", "horizon": "1m", "resolution": "60s"}


def per_pod(seconds: float) -> float:
    return 20.0 if 25 <= (seconds // 60) % 30 < 28 else 5.0 + (seconds // STEP) % 3


def _samples(t0: int) -> list[tuple[str, float]]:
    """(sample, Unix time): the trace from T0 in namespace a, from T0 + 7.3 s in b, T0 + 1 h 11 s in c."""
    return [(f'busy{{namespace="{ns}",pod="{pod}"}} {per_pod(i * STEP)}', t0 + shift + i * STEP)
            for ns, shift in SHIFTS.items() for i in range(MINUTES * 60 // STEP + 1) for pod in data.DEPLOYMENT_PODS]


@pytest.fixture(scope="module")
def shifted() -> Iterator[tuple[PrometheusServer, int]]:
    """(Prometheus, T0) with the trace at its three places."""
    t0 = (int(time.time()) - 4 * 3600) // 3600 * 3600
    lines = ["# TYPE busy gauge", *(f"{sample} {ts:.1f}" for sample, ts in _samples(t0)), "# EOF"]
    prom = start_backfilled("\n".join(lines) + "\n")
    yield prom, t0
    prom.close()


@pytest.fixture(scope="module")
def shifted_victoria() -> Iterator[tuple[VictoriaMetricsServer, int]]:
    """(VictoriaMetrics, T0) with the trace at its three places; its cache on, as deployed (it
    aligns a long range query's start to the step)."""
    t0 = (int(time.time()) - 4 * 3600) // 3600 * 3600
    with VictoriaMetricsServer() as vm:
        vm.import_prometheus("\n".join(f"{sample} {round(ts * 1000)}" for sample, ts in _samples(t0)))  # milliseconds
        yield vm, t0


def _files(tmp_path: Path) -> tuple[Path, Path]:
    rules, spec = tmp_path / "rules.yaml", tmp_path / "web.yaml"
    rules.write_text(yaml.safe_dump({"rules": [{**gauge_rule('busy{namespace!="",pod!=""}'), "forecast": FORECAST}]}))
    metrics = [{"type": "Pods", "pods": {"metric": {"name": name},
                                         "target": {"type": "AverageValue", "averageValue": "5"}}}
               for name in ("busy", "busy_forecast")]
    spec.write_text(yaml.safe_dump({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 20, "metrics": metrics}}))
    return rules, spec


def _window(t0: int, ns: str) -> list[str]:
    """The last hour of the trace in namespace `ns` (its forecast has 40 minutes of history before)."""
    start = t0 + SHIFTS[ns] + 2400
    return ["-n", ns, "--from", f"{start:.1f}", "--to", f"{start + 3600:.1f}", "--step", f"{STEP}s",
            "--startup-delay", "15s", "--initial-replicas", "2", "--no-png", "--no-html"]


def _seconds_in(when: str, start: str) -> float:
    return (datetime.fromisoformat(when) - datetime.fromisoformat(start)).total_seconds()


def _backtest_figures(shifted: tuple[Any, int], tmp_path: Path, ns: str) -> dict[str, Any]:
    """backtest's summary of the trace in `ns`, its times as seconds into the window."""
    prom, t0 = shifted
    rules, spec = _files(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(spec), "--prometheus-url", prom.url, "--rules", str(rules), *_window(t0, ns),
                     "--report", str(tmp_path / ns)], out, err)
    assert code == 0, err.getvalue()
    s = json.loads((tmp_path / ns / "summary.json").read_text())["specs"][0]
    assert _seconds_in(s["to"], s["from"]) == 3600
    events = [(_seconds_in(e["time"], s["from"]), e["from"], e["to"]) for e in s.pop("events")]
    for key in ("from", "to", "metrics"):  # the window's place in time; the PromQL names the namespace
        s.pop(key)
    return {**s, "events": events}


def _tune_answer(shifted, tmp_path: Path, ns: str) -> tuple[dict[str, Any], str]:
    """tune's answer on the trace in `ns`: its tune.json but for times, and recommended.yaml."""
    prom, t0 = shifted
    rules, spec = _files(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = tunecli.main([str(spec), "--prometheus-url", prom.url, "--rules", str(rules), *_window(t0, ns),
                         "--seasons", "10m", "30m", "--workers", "1", "--report", str(tmp_path / ns)], out, err)
    assert code == 0, err.getvalue()
    report = json.loads((tmp_path / ns / "tune.json").read_text())
    for key in ("from", "to", "chosenOn", "reportedOn", "seconds"):
        report.pop(key)
    return report, (tmp_path / ns / "recommended.yaml").read_text()


@pytest.mark.parametrize("backend", ["shifted", "shifted_victoria"])
def test_a_shifted_history_gives_backtest_the_same_figures(backend: str, request, tmp_path: Path):
    figures = {ns: _backtest_figures(request.getfixturevalue(backend), tmp_path, ns) for ns in SHIFTS}
    assert figures["a"]["scaleEvents"] > 0 and figures["a"]["stepsWithoutData"] == 0
    assert figures["b"] == figures["a"]   # 7.3 s later
    assert figures["c"] == figures["a"]   # 1 h 11 s later


def test_a_shifted_history_gives_tune_the_same_recommendation(shifted, tmp_path: Path):
    answers = {ns: _tune_answer(shifted, tmp_path, ns) for ns in SHIFTS}
    report, recommended = answers["a"]
    assert report["candidates"] > 1 and "metadata" in yaml.safe_load(recommended)
    for ns in ("b", "c"):
        assert answers[ns][0]["best"] == report["best"], ns
        assert answers[ns][1] == recommended, ns
        assert answers[ns][0] == report, ns


@pytest.mark.parametrize("query", [
    'sum(busy{namespace="b"}) by (pod)',
    'sum by (pod) (busy{namespace="b"} offset 1m) / on (pod) group_left busy{namespace="b"}',
    'max_over_time(busy{namespace="b",pod=~"web-.*"}[2m]) - time()',
    'count_values("v", {__name__="busy",namespace="b"} offset -30s) > bool 5',
    'label_replace(busy{namespace="b"}, "x", "sum by {a} offset 5m", "pod", "(.*)")',
    'busy{namespace="b"} @ AT - ignoring (x) busy{namespace="b"}',  # AT: between two samples; `@` stays put
])
@pytest.mark.parametrize("backend", ["shifted", "shifted_victoria"])
def test_the_frame_reads_what_the_query_reads(backend: str, query: str, request):
    """A query without subqueries, framed 7.3 s back (`align.shift`) and asked 7.3 s earlier, is
    answered what the query is at the moment itself, by the backend asked both."""
    server, t0 = request.getfixturevalue(backend)
    moment = t0 + SHIFTS["b"] + 2407.9  # between two samples of the trace in b

    def answer(promql: str, at: float) -> dict[str, str]:
        resp = httpx.get(f"{server.url}/api/v1/query", params={"query": promql, "time": f"{at:.3f}"}, timeout=30)
        assert resp.status_code == 200, resp.text
        return {json.dumps(r["metric"], sort_keys=True): r["value"][1] for r in resp.json()["data"]["result"]}

    query = query.replace("AT", f"{t0 + SHIFTS['b'] + 610:.1f}")
    expected = answer(query, moment)
    assert expected
    assert answer(align.shift(query, 7.3), moment - 7.3) == expected
