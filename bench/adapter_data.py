"""Generated data for the adapter benchmark: OpenMetrics text for `promtool` backfill and the
rules files the adapter runs with.

Everything is in one Prometheus, kept apart by metric-name prefixes:
- `bench_requests_total`: a counter on `POD_COUNT` pods (overhead: one pod and `pods/*`);
- `bench_load_<i>_total`: `LOAD_METRICS` counters on `LOAD_PODS` pods each (the load test);
- `bench_sel_inflight`: a gauge on `SELECTOR_PODS` pods (label-selector lookups);
- `disc<scale>_m<j>`: `DISCOVERY_NAMES` gauge names spread over many pods, one set per scale
  (10k, 100k, 200k series), with few samples each: only discovery reads them.
Counters grow linearly, so every rate is a known constant. Written as one stream of lines
straight to a file: 1.2M lines take a few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from kubesim.adapterrules import counter_rate_rule, gauge_rule

NAMESPACE = "bench"
POD_COUNT = 1000
LOAD_NAMESPACE = "load"
LOAD_METRICS = 20
LOAD_PODS = 10
SELECTOR_NAMESPACE = "sel"
SELECTOR_PODS = 5000
SELECTOR_APPS = 20  # pods carry app=app-<i % 20>: 250 pods per selector
DISCOVERY_NAMES = 50
DISCOVERY_SCALES = {"10k": 10_000, "100k": 100_000, "200k": 200_000}
STEP = 20  # seconds between samples of the queried series (rate[1m] sees 3)
BEFORE, AFTER = 600, 1500  # the queried series cover [now-10m, now+25m]


def pod_name(i: int) -> str:
    return f"pod-{i:04d}"


def selector_pod(i: int) -> str:
    return f"sel-{i:04d}"


def selector_app(i: int) -> str:
    return f"app-{i % SELECTOR_APPS}"


def _counter(name: str, pods: list[tuple[str, str]], now: int) -> Iterator[str]:
    family = name.removesuffix("_total")
    yield f"# TYPE {family} counter"
    times = range(now - BEFORE, now + AFTER + 1, STEP)
    for k, (ns, pod) in enumerate(pods):
        rate = 1 + (k % 10) / 4 + k / 7919  # irregular per-second rates, as real ones are
        labels = f'{{namespace="{ns}",pod="{pod}",container="app"}}'
        for t in times:
            yield f"{name}{labels} {rate * (t - now + BEFORE):g} {t}"


def _gauge(name: str, pods: list[tuple[str, str]], now: int, step: int, before: int, after: int) -> Iterator[str]:
    yield f"# TYPE {name} gauge"
    times = range(now - before, now + after + 1, step)
    for k, (ns, pod) in enumerate(pods):
        labels = f'{{namespace="{ns}",pod="{pod}",container="app"}}'
        value = k % 100
        for t in times:
            yield f"{name}{labels} {value} {t}"


def discovery_pods(scale: int) -> list[tuple[str, str]]:
    """Pods of one discovery scale: `scale / DISCOVERY_NAMES` pods in 50 namespaces."""
    per_name = scale // DISCOVERY_NAMES
    return [(f"ns-{p % 50:02d}", f"d-{p:06d}") for p in range(per_name)]


def lines(now: int) -> Iterator[str]:
    yield from _counter("bench_requests_total", [(NAMESPACE, pod_name(i)) for i in range(POD_COUNT)], now)
    load_pods = [(LOAD_NAMESPACE, f"load-{i:02d}") for i in range(LOAD_PODS)]
    for m in range(LOAD_METRICS):
        yield from _counter(f"bench_load_{m:02d}_total", load_pods, now)
    yield from _gauge("bench_sel_inflight", [(SELECTOR_NAMESPACE, selector_pod(i)) for i in range(SELECTOR_PODS)],
                      now, 60, BEFORE, AFTER)
    for label, scale in DISCOVERY_SCALES.items():
        pods = discovery_pods(scale)
        for j in range(DISCOVERY_NAMES):  # three samples: discovery only needs the series to exist
            yield from _gauge(f"disc{label}_m{j:02d}", pods, now, 900, 900, 900)
    yield "# EOF"


def write_openmetrics(path: Path, now: float | None = None) -> int:
    """Write the whole data set; returns the number of lines."""
    now = int(now or time.time())
    n = 0
    with open(path, "w", buffering=1 << 20) as f:
        batch: list[str] = []
        for line in lines(now):
            batch.append(line)
            if len(batch) >= 50_000:
                f.write("\n".join(batch) + "\n")
                n += len(batch)
                batch.clear()
        f.write("\n".join(batch) + "\n")
        n += len(batch)
    return n


QUERY_RULES = yaml.safe_dump({"rules": [
    counter_rate_rule('{__name__=~"bench_.*_total",namespace!="",pod!=""}'),
    gauge_rule('bench_sel_inflight{namespace!="",pod!=""}'),
]})


def discovery_rules(label: str) -> str:
    """Rules for one discovery scale: a template rule (label names come from Prometheus) and an
    overrides rule over the same series."""
    return f"""\
rules:
- seriesQuery: '{{__name__=~"disc{label}_.*",namespace!="",pod!=""}}'
  resources:
    template: "<<.Resource>>"
  metricsQuery: 'sum(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)'
- seriesQuery: '{{__name__=~"disc{label}_m0.*"}}'
  resources:
    overrides:
      namespace: {{resource: namespace}}
      pod: {{resource: pod}}
  name:
    matches: "^(.*)$"
    as: "${{1}}_copy"
  metricsQuery: 'max(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)'
"""


def direct_query(namespace: str, pods: list[str] | None, metric: str = "bench_requests_total") -> str:
    """The PromQL the adapter sends for `pods/<name>` (one pod) or `pods/*` (None)."""
    pod = f'pod="{pods[0]}"' if pods else 'pod!=""'
    return f'sum(rate({metric}{{namespace="{namespace}",{pod}}}[1m])) by (pod)'
