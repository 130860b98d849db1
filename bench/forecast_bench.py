"""Benchmark: what a forecast costs Prometheus. The PromQL the adapter serves for one Pods request
(`adapter.promql` + `adapter.forecast`, as the provider builds it) timed on a real Prometheus
holding 8 days of history: 20 pods of Deployment `web` counting `http_requests_total` every 15 s
under a daily wave, their ReplicaSet (so their names) changing every day.

Timed, each asked 40 times at different instants (Prometheus caches no results): the present
metric (`sum(rate(...[2m])) by (pod)` for today's 20 pods), and the forecast of the workload's
total: seasonal 1d and 7d (levelWindow 1h, resolution 1m: 122 evaluations of the query), seasons
[7d, 1d] (244) and linear (window 30m: 32 evaluations); against noise, `season: 1d` with an
envelope (126), the median of 3 days (378) and of 5 (630). No goal: the figures are for
docs/forecast-and-tune.md.
Writes bench/results/forecast.json.

    python bench/forecast_bench.py [--days 8]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapter.forecast import forecast_query, workload_pattern
from adapter.naming import compile_rules
from adapter.promql import resource_query, workload_query
from adapter.rules import parse_rules
from kubesim.adapterrules import counter_rate_rule
from kubesim.prometheus import start_backfilled
from promscaler.selectors import Selector

STEP = 15
PODS = 20
DAY = 86400
SAFE = "bcdfghjklmnpqrstvwxz2456789"
RULE = counter_rate_rule('http_requests_total{namespace!="",pod!=""}', "2m")
FORECASTS = {
    "seasonal 1d": "{method: seasonal, season: 1d, horizon: 5m}",
    "seasonal 7d": "{method: seasonal, season: 7d, horizon: 5m}",
    "seasons [7d, 1d]": "{method: seasonal, seasons: [7d, 1d], horizon: 5m}",
    "linear 30m": "{method: linear, window: 30m, horizon: 5m}",
    "1d envelope mean": "{method: seasonal, season: 1d, horizon: 5m, envelope: mean}",
    "1d median of 3, envelope mean": "{method: seasonal, season: 1d, horizon: 5m, pastSeasons: 3, combine: median, "
                                     "envelope: mean}",
    "1d median of 5, envelope q0.75": "{method: seasonal, season: 1d, horizon: 5m, pastSeasons: 5, combine: median, "
                                      "envelope: quantile, quantile: 0.75}",
}


def name(day: int, pod: int) -> str:
    """Deployment-style pod names, a new ReplicaSet hash every day."""
    def code(n: int, width: int) -> str:
        return "".join(SAFE[(n // len(SAFE) ** i) % len(SAFE)] for i in range(width))
    return f"web-{code(day * 7919 + 12345, 9)}-{code(pod * 104729 + day, 5)}"


def openmetrics(start: int, days: int) -> str:
    lines = ["# TYPE http_requests counter"]
    for day in range(days):
        for pod in range(PODS):
            total = 0.0
            for t in range(start + day * DAY, start + (day + 1) * DAY, STEP):
                rate = (30 + 25 * math.sin(2 * math.pi * (t % DAY) / DAY)) / PODS
                total += rate * STEP
                lines.append(f'http_requests_total{{namespace="shop",pod="{name(day, pod)}"}} {total:.1f} {t}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    end = int(time.time()) // 60 * 60 - 600
    start = end - args.days * DAY
    built = time.perf_counter()
    prom = start_backfilled(openmetrics(start, args.days))
    print(f"history: {args.days} days x {PODS} pods at {STEP} s, backfilled in {time.perf_counter() - built:.0f} s")
    today = [name(args.days - 1, p) for p in range(PODS)]
    queries: dict[str, str] = {}
    for label, block in FORECASTS.items():
        rules = yaml.safe_dump({"rules": [{**RULE, "forecast": yaml.safe_load(block)}]})
        rule = compile_rules(parse_rules(rules)).rules[0]
        assert rule.rule.forecast is not None
        if not queries:
            queries["present (20 pods)"] = resource_query(rule, "http_requests_total", "pod", "namespace", "shop",
                                                          today, Selector())
        pods = workload_query(rule, "http_requests_total", "pod", "namespace", "shop", workload_pattern(today),
                              Selector())
        queries[f"forecast {label}"] = forecast_query(rule.rule.forecast, f"sum({pods})")
    results = {}
    try:
        with httpx.Client(base_url=prom.url, timeout=60) as client:
            for label, query in queries.items():
                times = []
                for i in range(args.repeat):
                    at = end - 3600 + i * 61  # a different instant each time, within the last hour of history
                    t = time.perf_counter()
                    body = client.get("/api/v1/query", params={"query": query, "time": at}).json()
                    times.append((time.perf_counter() - t) * 1000)
                    assert body["status"] == "success" and body["data"]["result"], (label, body)
                times.sort()
                results[label] = {"p50_ms": round(statistics.median(times), 1),
                                  "p90_ms": round(times[int(len(times) * 0.9) - 1], 1)}
                print(f"{label:28s} p50 {results[label]['p50_ms']:7.1f} ms   p90 {results[label]['p90_ms']:7.1f} ms")
    finally:
        prom.close()
    out = Path(__file__).parent / "results" / "forecast.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"days": args.days, "pods": PODS, "step_seconds": STEP, "results": results,
                               "machine": platform.machine(), "cpus": os.cpu_count()}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
