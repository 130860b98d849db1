"""Where one pod's value goes, stage by stage (issue 37): this build and a baseline build side by side.

    .venv/bin/python bench/onepod_breakdown.py [--baseline REV] [--rounds N]

The one-pod request of `bench/adapter_bench.py --only overhead_tls` (TLS, front-proxy
authentication, uncached, against the same backfilled Prometheus), with each adapter process
counting its own stages (bench/stagecounters: the thread's CPU time and wall time per stage,
added up over every request). Requests go in turn to this build, the baseline (a worktree of
REV) and Prometheus directly. Prints a table of CPU microseconds per request by stage: TLS and
HTTP parsing (the process's CPU outside the app), authentication, authorization, routing, query
build, the query cache, the round trip to Prometheus, JSON decode and encode, the response write;
writes bench/results/onepod_breakdown.json. The counters add about a microsecond per stage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from adapter_bench import (
    CUSTOM,
    RESULTS,
    _tls_adapter,
    _worktree,
    bench_world,
    cpu_seconds,
    data,
    timed_gets,
)

COUNTERS = Path(__file__).resolve().parent / "stagecounters"


def stages(found: dict[str, list[int]], process_cpu_us: float) -> dict[str, float]:
    """CPU microseconds per request by stage, from one process's counters (each counter is
    inclusive: a stage is its counter less the counters inside it)."""
    n = found["asgi"][0]

    def cpu(name: str) -> float:
        return found[name][2] / n / 1000 if name in found else 0.0

    encode = cpu("encode_items") + cpu("encode_list") + cpu("encode_dumps")
    return {
        "TLS and HTTP parsing, the event loop (outside the app)": process_cpu_us - cpu("asgi"),
        "authentication (front-proxy certificate, X-Remote-* headers)": cpu("authn"),
        "authorization (request info, SubjectAccessReview answer kept)": cpu("authz") + cpu("request_info"),
        "security middleware, the rest (header strip, counters)": (cpu("asgi") - cpu("front") - cpu("authn")
                                                                   - cpu("authz") - cpu("request_info")),
        "routing (path, query string, answer memo, request metrics)": (cpu("front") - cpu("provider") - encode
                                                                       - cpu("response_write")),
        "query build (metric lookup, the rule's PromQL)": cpu("provider") - cpu("query_run"),
        "query cache (single flight) and per-rule timing": cpu("query_run") - cpu("prometheus_query"),
        "round trip to Prometheus, the adapter's side (request, answer, samples)": (cpu("prometheus_query")
                                                                                   - cpu("decode")),
        "JSON decode (Prometheus' answer)": cpu("decode"),
        "JSON encode (items, quantities, timestamps)": encode,
        "response write (uvicorn's send)": cpu("response_write"),
        "total: the process's CPU per request": process_cpu_us,
    }


def wait_counted(path: Path, at_least: int, timeout: float = 10.0) -> dict[str, list[int]]:
    """The counters once they include `at_least` requests (they are written every half second)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            found = json.loads(path.read_text())
            if found.get("asgi", [0])[0] >= at_least:
                return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path}: the adapter's stage counters did not reach {at_least} requests")
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", default="", metavar="REV", help="a git revision measured beside this build")
    p.add_argument("--rounds", type=int, default=2000)
    args = p.parse_args(argv)
    with bench_world() as (prom, rules, workdir), contextlib.ExitStack() as stack:
        checkouts = (stack.enter_context(_worktree(args.baseline, workdir / "baseline")),) if args.baseline else ()
        names = ["this", *(["baseline"] if checkouts else [])]
        outs = [workdir / f"stages-{name}.json" for name in names]
        adapters, tls = stack.enter_context(_tls_adapter(
            prom, rules, workdir, ["pods/bench_requests"], "--query-cache-ttl", "0", checkouts=checkouts,
            site=COUNTERS, env=[{"PROMSCALER_STAGES": str(out)} for out in outs]))
        adapters = adapters if checkouts else [adapters]
        ctx = ssl.create_default_context(cafile=tls["ca"])
        ctx.load_cert_chain(tls["cert"], tls["key"])
        one = data.pod_name(7)
        path = f"{CUSTOM}/namespaces/{data.NAMESPACE}/pods/{one}/bench_requests"
        urls = [*((a.url + path, {}) for a in adapters),
                (prom.url + "/api/v1/query", {"query": data.direct_query(data.NAMESPACE, [one])})]
        with httpx.Client(timeout=30, verify=ctx, headers={"Accept-Encoding": "identity", **tls["headers"]}) as c:
            warm = max(5, args.rounds // 10)
            timed_gets(c, urls, warm)
            before = [(cpu_seconds(a.proc.pid), wait_counted(out, warm)) for a, out in zip(adapters, outs, strict=True)]
            load = os.getloadavg()[0]
            *ms, direct = timed_gets(c, urls, args.rounds)
            load = (load + os.getloadavg()[0]) / 2
            result: dict = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": args.rounds,
                            "load_average": round(load, 1), "direct_p50_ms": round(statistics.median(direct), 3)}
            for name, a, out, (cpu0, counted0), times in zip(names, adapters, outs, before, ms, strict=True):
                process_us = (cpu_seconds(a.proc.pid) - cpu0) / args.rounds * 1e6
                counted = wait_counted(out, counted0["asgi"][0] + args.rounds)
                delta = {k: [v[i] - counted0.get(k, [0, 0, 0])[i] for i in range(3)] for k, v in counted.items()}
                p50 = statistics.median(times)
                result[name] = {"p50_ms": round(p50, 3), "ratio_to_direct": round(p50 / result["direct_p50_ms"], 3),
                                "stages_cpu_us": {k: round(v, 1) for k, v in stages(delta, process_us).items()}}
    if args.baseline:
        result["baseline"]["revision"] = args.baseline
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "onepod_breakdown.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    return 0


def table(r: dict) -> str:
    builds = [b for b in ("baseline", "this") if b in r]
    heads = [f"{r['baseline']['revision']}" if b == "baseline" else "this build" for b in builds]
    lines = [f"One pod over TLS, CPU microseconds per request by stage ({r['when']}, {r['rounds']} requests "
             f"each, load average {r['load_average']})", "",
             "| stage | " + " | ".join(heads) + " |", "| --- |" + " ---: |" * len(builds)]
    for stage in r[builds[0]]["stages_cpu_us"]:
        lines.append(f"| {stage} | " + " | ".join(f"{r[b]['stages_cpu_us'][stage]:.0f}" for b in builds) + " |")
    lines.append("| p50 latency / the direct query's, same run | " + " | ".join(
        f"{r[b]['p50_ms']:.2f} / {r['direct_p50_ms']:.2f} ms = {r[b]['ratio_to_direct']:.2f}x" for b in builds) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
