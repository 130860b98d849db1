"""The encoded-form cache of the adapter's Prometheus calls (`adapter.prometheus._form`) over an
hour of an HPA's pattern, in simulated time: the instant queries of `--hot` objects asked every
15 s sync period, and a relist every 60 s (the default `--metrics-relist-interval`) over
`--series-queries` seriesQueries, each asking Prometheus as discovery does: the label names and
two labels' metric names with `start` = now - the max age (new every relist), and its freshness
query (the same text every relist). Two policies on the same sequence of calls, alternated:

- before: every call's form kept in one LRU cache of the same size (52c57b9^);
- after: the client's own (`_encoded`: instant queries kept, the rest encoded anew).

Prints, per policy, how many times hot forms were encoded in the hour (cache misses, each
object's first included), the share of hot calls answered from the cache, and the CPU
microseconds encoding took per sync period (the thread's CPU time, best of `--rounds`); writes
bench/results/form_cache.json.

    .venv/bin/python bench/form_cache_bench.py [--hot 100,700,900] [--series-queries 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

from adapter import prometheus  # noqa: E402

SYNC, RELIST, HOUR = 15.0, 60.0, 3600.0
Call = tuple[str, tuple[tuple[str, str], ...], bool]   # endpoint, params, hot


def hour_of_calls(hot: int, series_queries: int) -> list[list[Call]]:
    """Each sync period's calls in order: a relist's (every fourth period), then the hot queries."""
    queries = [(("query", f'sum(rate(http_requests_total{{namespace="web",pod="web-{i}"}}[1m])) by (pod)'),
                ("timeout", "30s")) for i in range(hot)]
    matches = [f'app_{i}_total{{namespace!="",pod!=""}}' for i in range(series_queries)]
    out: list[list[Call]] = []
    for step in range(int(HOUR / SYNC)):
        now = 1_765_000_000.0 + step * SYNC
        calls: list[Call] = []
        if step % int(RELIST / SYNC) == 0:
            start = f"{now - RELIST:.3f}"
            for m in matches:
                calls.append(("labels", (("match[]", m), ("start", start)), False))
                for label in ("namespace", "pod"):
                    calls.append(("label/__name__/values", (("match[]", f"{m[:-1]},{label}!=\"\"}}"), ("start", start)),
                                  False))
                calls.append(("query", (("query", f"group by (__name__) (last_over_time({m}[60000ms]))"),
                                        ("timeout", "30s")), False))
        calls += [("query", q, True) for q in queries]
        out.append(calls)
    return out


def run(periods: list[list[Call]], encode: Callable[[str, tuple[tuple[str, str], ...]], str],
        info: Callable[[], tuple[int, int]]) -> dict[str, float]:
    """Every call through `encode`; hot misses counted by the cache's own misses on hot calls."""
    hot_misses = hot_calls = 0
    cpu = 0.0
    for calls in periods:
        started = time.thread_time()
        for endpoint, params, hot in calls:
            if hot:
                before = info()[1]
                encode(endpoint, params)
                hot_misses += info()[1] - before
                hot_calls += 1
            else:
                encode(endpoint, params)
        cpu += time.thread_time() - started
    return {"hot_misses": hot_misses, "hot_hit_share": round(1 - hot_misses / hot_calls, 4),
            "encode_us_per_sync": round(cpu / len(periods) * 1e6, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hot", default="100,700,900", help="hot instant queries (objects), comma-separated")
    p.add_argument("--series-queries", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    size = prometheus._form.cache_info().maxsize
    old = functools.lru_cache(maxsize=size)(urlencode)
    policies: dict[str, tuple[Callable[[str, tuple[tuple[str, str], ...]], str], Callable[[], tuple[int, int]]]] = {
        "before": (lambda _e, params: old(params), lambda: (old.cache_info().hits, old.cache_info().misses)),
        "after": (prometheus._encoded,
                  lambda: (prometheus._form.cache_info().hits, prometheus._form.cache_info().misses)),
    }
    out: dict[str, dict] = {}
    for hot in (int(h) for h in args.hot.split(",")):
        periods = hour_of_calls(hot, args.series_queries)
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.rounds):
            for name, (encode, info) in policies.items():
                old.cache_clear()
                prometheus._form.cache_clear()
                got = run(periods, encode, info)
                if name not in best or got["encode_us_per_sync"] < best[name]["encode_us_per_sync"]:
                    best[name] = got
        out[str(hot)] = best
        for name, got in best.items():
            print(f"hot {hot:5d}, {args.series_queries} seriesQueries, {name:6s}: {got['hot_misses']:6d} hot forms "
                  f"encoded in the hour (the first {hot} included), {got['hot_hit_share']:.2%} hot hits, "
                  f"{got['encode_us_per_sync']:8.1f} us encoding per sync period")
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cache_size": size,
              "series_queries": args.series_queries, "by_hot": out}
    (RESULTS / "form_cache.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
