"""report.html of `backtest` and `tune`, opened from disk in Debian's Chromium (headless, Playwright),
over the same real Prometheus histories and hand-worked replays as test_backtest.py and test_tune.py.

A screenshot of each page goes to $REPORT_SCREENSHOTS (docs/ when the docs' figures are remade:
`REPORT_SCREENSHOTS=docs pytest tests/backtest/test_report_html.py`), else to the test's tmp dir.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.backtest import cli, html
from autoscaler.backtest.html import BUCKETS
from tests.support import chromium_page

from . import data, tunedata
from .test_backtest import LONG_REPLICAS, SHORT_EVENTS, SHORT_REPLICAS, _run

CHARTS = "window.report.charts.map(u => u.data)"


def _screenshot_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get("REPORT_SCREENSHOTS") or tmp_path)


def _open(page: Any, path: Path) -> None:
    page.goto(path.resolve().as_uri())
    page.wait_for_function("window.report && window.report.ready", timeout=20_000)


def _kept(columns: list[list[float | None]], events: list[int], i0: int, i1: int, buckets: int = BUCKETS) -> list[int]:
    """The decimation rule the docs state, written out plainly: every step from i0 to i1 up to
    `buckets` of them; beyond, per bucket of ceil(steps / buckets) steps aligned on multiples of
    that size, its first step and each column's first lowest and first highest; and the events."""
    count = i1 - i0 + 1
    if count <= buckets:
        return list(range(i0, i1 + 1))
    every = -(-count // buckets)
    keep = {i for i in events if i0 <= i <= i1}
    for b in range(i0 // every * every, i1 + 1, every):
        steps = range(max(b, i0), min(b + every - 1, i1) + 1)
        keep.add(steps[0])
        for col in columns:
            known = [i for i in steps if col[i] is not None]
            if known:
                keep.add(min(known, key=lambda i: (col[i], i)))
                keep.add(min(known, key=lambda i: (-col[i], i)))
    return sorted(keep)


def test_the_rule_worked_by_hand():
    # 10 steps in buckets of ceil(10 / 3) = 4: [5 1 9 3] [2 2 8 0] [- 7]: each bucket's first step,
    # its lowest and highest (0, 1, 2 | 4, 7, 6 | 8, 9, 9), and the scale event at step 3
    column = [5, 1, 9, 3, 2, 2, 8, 0, None, 7]
    assert _kept([column], [3], 0, 9, buckets=3) == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert _kept([column], [], 0, 9, buckets=10) == list(range(10))


def test_backtest_report_in_chromium(history, tmp_path: Path):
    code, out, err, _summary = _run(history, tmp_path)
    assert code == 0, err
    report = tmp_path / "report"
    assert (report / "backtest.png").exists() and (report / "summary.json").exists()
    assert f"{report / 'report.html'}" in out
    html = (report / "report.html").read_text()
    assert "Permission is hereby granted" in html  # uPlot's MIT license travels with it
    _prom, start = history
    with chromium_page() as (page, errors, requests):
        _open(page, report / "report.html")
        charts = page.evaluate(CHARTS)
        # one row per spec; every step drawn (24 <= the buckets); times are the grid's
        assert len(charts) == 2
        grid = [start + i * data.STEP for i in range(data.STEPS)]
        for chart in charts:
            assert chart[0] == grid
            assert all(len(series) == data.STEPS for series in chart)
        labels = page.evaluate("window.report.charts[0].series.map(s => s.label)")
        assert labels == ["time", "observed Pods inflight_requests per ready pod",
                          "Pods inflight_requests (as the engine saw it)", "simulated replicas", "actual replicas",
                          "scale events"]
        short, long = charts
        assert short[3] == SHORT_REPLICAS and long[3] == LONG_REPLICAS
        assert short[4] == [len(data.pods_at(i)) for i in range(data.STEPS)]  # kube-state-metrics' replicas
        # the events: markers at the new replica count, at each event's step only
        assert [(i, short[5][i]) for i in range(data.STEPS) if short[5][i] is not None] == \
            [(i, to) for i, _, to in SHORT_EVENTS]
        assert [i for i in range(data.STEPS) if long[5][i] is not None] == [4, 8]
        # the summary table: the terminal's figures
        assert page.inner_text("table.summary").count("6 (4/2)") == 1
        # the one reference both rows are measured against, named as the terminal names it
        assert page.inner_text("#reference") == ("under-provisioned: the observed Pods inflight_requests per ready pod "
                                                 "above 10 x (1 + 0.1) = 11 (short.yaml (short)'s first metric's "
                                                 "target and scale-up tolerance)")
        assert page.inner_text("#reference") in " ".join(out.split())
        # hovering the first scale-up (i4: 40 over 2 ready pods = 20 per pod, ratio 2 -> 4) shows the engine's words
        box = page.evaluate("""i => { const u = window.report.charts[0], r = u.over.getBoundingClientRect();
            return [r.left + u.valToPos(u.data[0][i], 'x'), r.top + u.valToPos(4, 'replicas')]; }""", 4)
        page.mouse.move(box[0], box[1])
        text = page.inner_text("#explain-0")
        assert "scale from 2 to 4 replicas" in text
        assert "Pods inflight_requests: current 20, target 10 per pod, ratio 2.000 -> 4 replicas" in text
        assert "result: scale from 2 to 4 replicas" in text
        # the same moment in the other row (the cursor is shared): long scaled the same way there
        assert "result: scale from 2 to 4 replicas" in page.inner_text("#explain-1")
        page.screenshot(path=str(_screenshot_dir(tmp_path) / "backtest-report.png"), full_page=True)
        # dragging across a quarter of the plot zooms both rows to it
        before = page.evaluate("window.report.charts.map(u => [u.scales.x.min, u.scales.x.max])")
        assert before[0] == [grid[0], grid[-1]]
        r = page.evaluate("(() => { const r = window.report.charts[0].over.getBoundingClientRect();"
                          " return [r.left, r.top, r.width, r.height]; })()")
        y = r[1] + r[3] / 2
        page.mouse.move(r[0] + r[2] * 0.25, y)
        page.mouse.down()
        page.mouse.move(r[0] + r[2] * 0.4, y, steps=5)
        page.mouse.move(r[0] + r[2] * 0.5, y, steps=5)
        page.mouse.up()
        after = page.evaluate("window.report.charts.map(u => [u.scales.x.min, u.scales.x.max])")
        span = grid[-1] - grid[0]
        assert after[0] == after[1]
        assert after[0][0] == pytest.approx(grid[0] + span * 0.25, abs=span * 0.02)
        assert after[0][1] == pytest.approx(grid[0] + span * 0.5, abs=span * 0.02)
        # in view, every step (and one on each side, so the lines reach the edges)
        first = max(0, math.floor((after[0][0] - start) / data.STEP) - 1)
        last = min(data.STEPS - 1, math.ceil((after[0][1] - start) / data.STEP) + 1)
        zoomed = page.evaluate(CHARTS)
        assert zoomed[0][0] == grid[first:last + 1] and zoomed[0][3] == SHORT_REPLICAS[first:last + 1]
        page.click("text=reset zoom")
        assert page.evaluate("window.report.charts.map(u => [u.scales.x.min, u.scales.x.max])") == before
        assert errors == [] and requests == []


def test_backtest_report_decimates_only_where_the_screen_cannot_show_the_points(history, tmp_path: Path):
    # 1 s steps over 40 minutes from the history's start: 2,401 steps, more than the 2,000 buckets
    _prom, start = history
    n = 2401
    code, _out, err, summary = _run(history, tmp_path, "--step", "1s", "--to", str(start + n - 1), "--no-png")
    assert code == 0, err
    with chromium_page() as (page, errors, _requests):
        _open(page, tmp_path / "report" / "report.html")
        specs = page.evaluate("window.report.specs.map(s => s.series.map(c => c.values))")
        charts = page.evaluate(CHARTS)
        for chart, columns, spec in zip(charts, specs, summary["specs"], strict=True):
            events = [round(time_of(e) - start) for e in spec["events"]]
            assert events and all(len(c) == n for c in columns)
            # the page has every step: the simulated replicas are the ones the events make (from the initial 2)
            replicas, current = [], 2
            for i in range(n):
                current = next((e["to"] for at, e in zip(events, spec["events"], strict=True) if at == i), current)
                replicas.append(current)
            assert columns[2] == replicas
            # drawn: the rule's steps, fewer than all, every event marked at its new count
            steps = _kept(columns, events, 0, n - 1)
            assert len(steps) < n
            assert chart[0] == [start + i for i in steps]
            assert chart[3] == [replicas[i] for i in steps]
            assert [(t - start, m) for t, m in zip(chart[0], chart[5], strict=True) if m is not None] == \
                [(i, e["to"]) for i, e in zip(events, spec["events"], strict=True)]
        # zoomed in to 300 s: every step in view (and one on each side)
        page.evaluate(f"window.report.zoom({start + 1000}, {start + 1300})")
        for chart, columns in zip(page.evaluate(CHARTS), specs, strict=True):
            assert chart[0] == [start + i for i in range(999, 1302)]
            assert chart[3] == columns[2][999:1302]
        assert errors == []


def test_without_the_charting_library_one_line(history, tmp_path: Path, monkeypatch):
    monkeypatch.setattr(html, "UPLOT", tmp_path / "nowhere" / "uplot")
    code, _out, err, _summary = _run(history, tmp_path)
    assert code == 1
    missing = tmp_path / "nowhere" / "uplot" / "package.json"
    assert err.count("\n") == 1 and f"report.html: no {missing}: run scripts/setup.sh (npm ci in " in err
    assert (tmp_path / "report" / "summary.json").exists() and (tmp_path / "report" / "backtest.png").exists()
    # --no-html: as before the page, for pipes and CI where the library is not installed (the image)
    (tmp_path / "report" / "report.html").unlink(missing_ok=True)
    code, _out, err, summary = _run(history, tmp_path, "--no-html")
    assert code == 0, err
    assert summary["specs"] and not (tmp_path / "report" / "report.html").exists()


def time_of(event: dict) -> float:
    from promscaler.times import parse_time

    return parse_time(event["time"]).timestamp()


def test_tune_report_in_chromium(tune_history, tmp_path: Path):
    code, _out, err = tunedata.run_tune(tune_history, tmp_path)
    assert code == 0, err
    report = tmp_path / "report"
    tune = json.loads((report / "tune.json").read_text())
    with chromium_page() as (page, errors, requests):
        _open(page, report / "report.html")
        chosen, held = page.evaluate(CHARTS)
        # every candidate on the chosen-on part; the table's on the held-out part
        assert len(chosen[1][0]) == tune["candidates"] == len(tune["all"])
        assert len(held[1][0]) == len(tune["top"])
        # the recommended spec as worked out by hand in test_tune: 2.5 replica-hours and 15 s (0.25 min)
        # under-provisioned on the held-out part; the given one 20 pods x 40 steps, never under
        assert held[3] == [[0.25], [2.5]]
        assert held[2] == [[0], [pytest.approx(20 * 40 * tunedata.STEP / 3600, abs=1e-3)]]
        assert chosen[3][0] == [0.25]  # chosen on: 15 s under-provisioned too
        recommended = yaml.safe_load(page.inner_text("#recommended-yaml"))
        assert recommended["spec"]["metrics"][0]["pods"]["target"]["averageValue"] == "10"
        assert recommended["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 0
        assert yaml.safe_load(page.inner_text("#given-yaml")) == tunedata.GIVEN
        assert "recommended" in page.inner_text(".verdict")
        assert page.inner_text("#reference").startswith(
            "under-provisioned: the observed Pods busy_workers per ready pod above 10 x (1 + 0.1) = 11 "
            "(--reference-target and web.yaml (web)'s scale-up tolerance); to read the same in backtest: backtest ")
        # the hindsight best of the search space, as worked out by hand in test_tune: the recommendation itself
        assert page.inner_text(".hindsight").endswith(
            "2.5 replica-hours, 15 s under-provisioned; the recommendation is +0.0% in replica-hours from it")
        page.screenshot(path=str(_screenshot_dir(tmp_path) / "tune-report.png"), full_page=True)
        assert errors == [] and requests == []


def test_backtest_report_draws_each_forecast_beside_the_load_it_forecast(history, tmp_path: Path):
    """A spec listing a linear forecast of its metric (window 1m, 30 s ahead). The panel draws, at
    each step t, the forecast made then (Prometheus asked its PromQL directly) and the load that
    came 2 steps later (the known history's totals); its figures are numpy's over the same pairs."""
    import re

    import httpx
    import numpy as np

    prom, start = history
    rules = json.loads(json.dumps(data.RULES))
    rules["rules"][0]["forecast"] = {"method": "linear", "window": "1m", "resolution": "15s", "horizon": "30s"}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    spec = data.spec("fc", 30)
    spec["spec"]["metrics"].append({"type": "Pods", "pods": {"metric": {"name": "inflight_requests_forecast"},
                                                             "target": {"type": "AverageValue", "averageValue": "10"}}})
    (tmp_path / "fc.yaml").write_text(yaml.safe_dump(spec))
    end = start + (data.STEPS - 1) * data.STEP
    out, err = io.StringIO(), io.StringIO()
    assert cli.main([str(tmp_path / "fc.yaml"), "--prometheus-url", prom.url, "--rules", str(tmp_path / "rules.yaml"),
                     "--from", str(start), "--to", str(end), "--startup-delay", "15s", "--no-png",
                     "--report", str(tmp_path / "report")], out, err) == 0, err.getvalue()
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["specs"][0]
    answer = httpx.get(f"{prom.url}/api/v1/query_range", params={
        "query": summary["metrics"][1]["promql"], "start": start, "end": end, "step": data.STEP}).json()
    forecast = np.full(data.STEPS, np.nan)
    for t, v in answer["data"]["result"][0]["values"]:
        forecast[round((t - start) / data.STEP)] = float(v)
    shift = 30 // data.STEP
    came = np.array(data.totals()[shift:] + [np.nan] * shift)
    both = np.isfinite(forecast) & np.isfinite(came)
    f, a = forecast[both], came[both]
    assert 0 < both.sum() < data.STEPS and (f < a).any() and (f > a).any()  # a forecast both below and above
    bias, below = float(np.mean(f - a)), float(np.mean(f < a))
    expected = {"metric": "Pods inflight_requests_forecast", "horizonSeconds": 30.0, "steps": int(both.sum()),
                "bias": pytest.approx(bias), "relativeBias": pytest.approx(bias / float(np.mean(a))),
                "belowShare": pytest.approx(below)}
    assert summary["forecasts"] == [expected]
    with chromium_page() as (page, errors, requests):
        _open(page, tmp_path / "report" / "report.html")
        charts = page.evaluate(CHARTS)
        assert len(charts) == 2  # the spec's row, then its forecast's
        grid = [start + i * data.STEP for i in range(data.STEPS)]
        assert charts[1][0] == grid
        assert charts[1][1] == pytest.approx([None if np.isnan(v) else v for v in forecast], abs=1e-4)
        assert charts[1][2] == [None if np.isnan(v) else v for v in came]
        labels = page.evaluate("window.report.charts[1].series.map(s => s.label)")
        assert labels == ["time", "Pods inflight_requests_forecast made at t (a total)",
                          "the load it forecast, as it came at t + 30s"]
        text = page.inner_text("#forecast-0-0")
        m = re.fullmatch(r"Pods inflight_requests_forecast \(30s ahead\) against the load that came: bias "
                         r"([-+][0-9.e+-]+) \(([-+][0-9.]+)%\), below it ([0-9.]+)% of (\d+) steps", text)
        assert m, text
        assert float(m[1]) == pytest.approx(bias, rel=1e-3)
        assert float(m[2]) == pytest.approx(100 * bias / float(np.mean(a)), abs=0.05)
        assert float(m[3]) == pytest.approx(100 * below, abs=0.05) and int(m[4]) == both.sum()
        assert text in " ".join(out.getvalue().split())  # the terminal prints the same line
        page.screenshot(path=str(_screenshot_dir(tmp_path) / "backtest-forecast.png"), full_page=True)
        # zooming zooms the forecast's panel with the spec's row
        page.evaluate(f"window.report.zoom({grid[4]}, {grid[12]})")
        assert page.evaluate("window.report.charts.map(u => [u.scales.x.min, u.scales.x.max])") == \
            [[grid[4], grid[12]]] * 2
        assert errors == [] and requests == []
