"""metrics.k8s.io benchmark (issue 13): `kubectl top pods -A` and `kubectl top nodes` over a big
cluster, through the adapter, next to the direct PromQL.

    .venv/bin/python bench/resource_bench.py [--pods 5000] [--namespaces 100] [--nodes 500] [--requests 30]
        [--version v1|v1beta1]

A real Prometheus backfilled with cAdvisor- and node-exporter-shaped series
(`kubesim.resourceseries`: one container per pod, every fifth pod a sidecar too, plus the pods'
own `container=""` series), KubeSim holding the Running pods and the nodes, and the adapter as a
real subprocess connected to KubeSim, serving prometheus-adapter's chart-default `resourceRules`.
Measured, each sequentially (one request at a time, as `kubectl top` asks):
1. all pods (`/apis/metrics.k8s.io/<version>/pods`, v1 by default: what `kubectl top` 1.37 asks;
   v1beta1 is the same code), one namespace's pods, all nodes: the adapter
   uncached (`--query-cache-ttl 0`: Prometheus asked on every request), p50/p99, next to the same
   two PromQL queries (CPU and memory, concurrently) sent to Prometheus directly;
2. Prometheus queries per request (the adapter's own counter), and the adapter's CPU per request;
3. the all-pods answer repeated with the default freshness (answers kept while fresh);
4. the real `kubectl top pods -A` and `kubectl top nodes` through KubeSim's aggregation.
Goal: all pods in under 1 s on 2 cores, at most 2 Prometheus queries per request.
Writes bench/results/resource.json and prints the figures next to the goals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubesim.apiserver import KubeSim  # noqa: E402
from kubesim.processes import AdapterProcess  # noqa: E402
from kubesim.prometheus import start_backfilled  # noqa: E402
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES, Container, NodeSeries, PodSeries, openmetrics  # noqa: E402

RESULTS = ROOT / "bench" / "results"
GROUP = "/apis/metrics.k8s.io"
KUBECTL = str(ROOT / ".venv" / "bin" / "kubectl")
# The same queries the rules render for "every pod" / "every node" (what the adapter sends).
DIRECT = {
    "pods": ('sum by (namespace,pod,container) (rate(container_cpu_usage_seconds_total{pod!="",container!="",'
             'pod!=""}[3m]))',
             'sum by (namespace,pod,container) (container_memory_working_set_bytes{pod!="",container!="",pod!=""})'),
    "namespace": ('sum by (namespace,pod,container) (rate(container_cpu_usage_seconds_total{namespace="ns-7",pod!="",'
                  'container!="",pod!=""}[3m]))',
                  'sum by (namespace,pod,container) (container_memory_working_set_bytes{namespace="ns-7",pod!="",'
                  'container!="",pod!=""})'),
    "nodes": ('sum by (node) (rate(node_cpu_seconds_total{node!="",mode!="idle",mode!="iowait",mode!="steal"}[3m]))',
              'sum by (instance) (node_memory_MemTotal_bytes{job="node-exporter",instance!=""} - '
              'node_memory_MemAvailable_bytes{job="node-exporter",instance!=""})'),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(ms), 2), "p99_ms": round(pct(ms, 0.99), 2), "n": len(ms)}


def cluster(pods: int, namespaces: int, nodes: int) -> tuple[list[PodSeries], list[NodeSeries]]:
    per_ns = pods // namespaces
    pod_series = []
    for i in range(pods):
        ns, n = f"ns-{i // per_ns}", i % per_ns
        containers = [Container("app", 0.0105 + (i % 97) / 100, (64 + i % 200) * 1024 * 1024)]
        if i % 5 == 0:
            containers.append(Container("sidecar", 0.0055, 32 * 1024 * 1024))
        pod_series.append(PodSeries(ns, f"app-{n}", tuple(containers), node=f"node-{i % nodes}"))
    return pod_series, [NodeSeries(f"node-{i}") for i in range(nodes)]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def query_count(adapter: AdapterProcess) -> float:
    for line in adapter.get("/metrics").text.splitlines():
        if line.startswith('promscaler_adapter_prometheus_query_duration_seconds_count{endpoint="query"'):
            return float(line.split()[-1])
    return 0.0


async def direct(prom_url: str, queries: tuple[str, str], n: int) -> list[float]:
    """Both queries at once, as the adapter sends them; milliseconds per pair."""
    out = []
    async with httpx.AsyncClient(base_url=prom_url, timeout=30) as client:
        for _ in range(n + 2):
            started = time.perf_counter()
            answers = await asyncio.gather(*(client.get("/api/v1/query", params={"query": q}) for q in queries))
            out.append((time.perf_counter() - started) * 1000)
            assert all(a.status_code == 200 and a.json()["data"]["result"] for a in answers)
    return out[2:]


def through_adapter(adapter: AdapterProcess, path: str, n: int, expect: int) -> dict:
    ms, items = [], 0
    with httpx.Client(base_url=adapter.url, timeout=30) as client:
        client.get(path)
        queries, cpu = query_count(adapter), cpu_seconds(adapter.proc.pid)
        for _ in range(n):
            started = time.perf_counter()
            r = client.get(path)
            ms.append((time.perf_counter() - started) * 1000)
            assert r.status_code == 200, r.text[:300]
            items = len(r.json()["items"])
        per_request = (query_count(adapter) - queries) / n
        cpu_ms = (cpu_seconds(adapter.proc.pid) - cpu) / n * 1000
    assert items == expect, (path, items, expect)
    return {**summary(ms), "items": items, "prometheus_queries_per_request": per_request,
            "adapter_cpu_ms_per_request": round(cpu_ms, 1), "bytes": len(r.content)}


def kubectl_top(sim: KubeSim, *args: str, n: int = 3) -> dict:
    ms, rows = [], 0
    for _ in range(n):
        started = time.perf_counter()
        out = subprocess.run([KUBECTL, "--kubeconfig", sim.kubeconfig_path, "top", *args], capture_output=True,
                             text=True, timeout=120)
        ms.append((time.perf_counter() - started) * 1000)
        assert out.returncode == 0, out.stderr
        rows = len(out.stdout.splitlines()) - 1
    return {"median_ms": round(statistics.median(ms), 1), "rows": rows, "n": n}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--namespaces", type=int, default=100)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--requests", type=int, default=30)
    p.add_argument("--version", choices=("v1", "v1beta1"), default="v1", help="the metrics.k8s.io version asked")
    args = p.parse_args()
    group = f"{GROUP}/{args.version}"
    pods, nodes = cluster(args.pods, args.namespaces, args.nodes)
    started = time.perf_counter()
    text = openmetrics(pods, nodes, span=600, step=60)
    prom = start_backfilled(text)
    del text
    log(f"Prometheus backfilled ({args.pods} pods, {args.nodes} nodes) in {time.perf_counter() - started:.1f}s")
    sim = KubeSim(ready_delay=0, bookmark_interval=60).start()
    adapters: list[AdapterProcess] = []
    result: dict = {"pods": args.pods, "namespaces": args.namespaces, "nodes": args.nodes, "version": args.version,
                    "host_cpus": os.cpu_count(),
                    "platform": platform.platform(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        started = time.perf_counter()
        for ns in sorted({p.namespace for p in pods}):
            sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for pod in pods:
            sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": {"app": pod.name}},
                       "spec": {"nodeName": pod.node, "containers": [{"name": c.name} for c in pod.containers]},
                       "status": {"phase": "Running"}})
        for node in nodes:
            sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name},
                       "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}})
        log(f"KubeSim: {args.pods} pods and {args.nodes} nodes applied in {time.perf_counter() - started:.1f}s")
        rules = Path(prom.dir) / "rules.yaml"
        rules.write_text(yaml.safe_dump({"resourceRules": DEFAULT_RESOURCE_RULES}))
        uncached = AdapterProcess("--prometheus-url", prom.url, "--config", str(rules), "--kubeconfig",
                                  sim.kubeconfig_path, "--query-cache-ttl", "0s").wait_ready()
        adapters.append(uncached)
        cached = AdapterProcess("--prometheus-url", prom.url, "--config", str(rules), "--kubeconfig",
                                sim.kubeconfig_path).wait_ready()
        adapters.append(cached)
        n = args.requests
        per_ns = args.pods // args.namespaces
        for name, path, expect in (("pods", f"{group}/pods", args.pods),
                                   ("namespace", f"{group}/namespaces/ns-7/pods", per_ns),
                                   ("nodes", f"{group}/nodes", args.nodes)):
            result[name] = {"adapter": through_adapter(uncached, path, n, expect),
                            "direct": summary(asyncio.run(direct(prom.url, DIRECT[name], n)))}
            a, d = result[name]["adapter"], result[name]["direct"]
            log(f"{name}: adapter p50 {a['p50_ms']} ms p99 {a['p99_ms']} ms ({a['prometheus_queries_per_request']:g} "
                f"queries/request, {a['adapter_cpu_ms_per_request']} ms adapter CPU); direct PromQL p50 "
                f"{d['p50_ms']} ms p99 {d['p99_ms']} ms")
        result["pods_kept_answer"] = through_adapter(cached, f"{group}/pods", n, args.pods)
        sim.set_aggregated_api("metrics.k8s.io", uncached.url)
        result["kubectl_top_pods_all"] = kubectl_top(sim, "pods", "-A")
        result["kubectl_top_nodes"] = kubectl_top(sim, "nodes")
    finally:
        for a in adapters:
            a.stop()
        sim.stop()
        prom.close()
    pods_r = result["pods"]["adapter"]
    result["goal"] = {"all_pods_p99_ms": 1000, "max_queries_per_request": 2}
    result["meets_goal"] = pods_r["p99_ms"] < 1000 and all(
        result[k]["adapter"]["prometheus_queries_per_request"] <= 2 for k in ("pods", "namespace", "nodes"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "resource.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nmetrics.k8s.io/{args.version}, {args.pods} pods in {args.namespaces} namespaces, {args.nodes} nodes "
          f"({os.cpu_count()} cores); adapter uncached (Prometheus asked every request) vs direct PromQL "
          "(both queries)")
    print(f"{'request':<28}{'adapter p50/p99 ms':>22}{'direct p50/p99 ms':>22}{'queries/req':>13}{'adapter CPU':>13}")
    for k, label in (("pods", "all pods (top pods -A)"), ("namespace", f"one namespace ({per_ns})"),
                     ("nodes", "all nodes (top nodes)")):
        a, d = result[k]["adapter"], result[k]["direct"]
        print(f"{label:<28}{a['p50_ms']:>11.1f} /{a['p99_ms']:>8.1f}{d['p50_ms']:>13.1f} /{d['p99_ms']:>7.1f}"
              f"{a['prometheus_queries_per_request']:>13g}{a['adapter_cpu_ms_per_request']:>10.1f} ms")
    kept = result["pods_kept_answer"]
    print(f"all pods, answer kept while fresh (default): p50 {kept['p50_ms']} ms, p99 {kept['p99_ms']} ms")
    print(f"kubectl top pods -A through KubeSim: {result['kubectl_top_pods_all']['median_ms']} ms median "
          f"({result['kubectl_top_pods_all']['rows']} rows); kubectl top nodes: "
          f"{result['kubectl_top_nodes']['median_ms']} ms")
    print(f"goal: all pods p99 < 1000 ms, <= 2 Prometheus queries per request: "
          f"{'MEETS' if result['meets_goal'] else 'MISSES'}; written to {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
