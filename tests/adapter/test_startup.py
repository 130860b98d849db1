"""How the adapter starts (issues 23 and 28): connected to a cluster it imports the kubernetes
client's asyncio half and nothing of the rest, aiohttp without its CA loading, no websocket
protocol; the first relist's questions are asked at start and its answers taken by the first
relist; the collector, off while it starts, runs once it serves.

Real parts: KubeSim over `--kubeconfig`, the session's real Prometheus, the adapter as a subprocess
with Python's own import log (`PYTHONPROFILEIMPORTTIME`); its `/metrics` over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from adapter.discovery import Discovery, FirstQuestions
from adapter.front import Front
from adapter.health import Health
from adapter.naming import BUILTIN_TABLE, Resource, ResourceTable, compile_rules
from adapter.prometheus import PrometheusClient
from adapter.rules import parse_rules
from adapter.selfmetrics import SelfMetrics
from adapter.settings import parse_settings
from kubesim.apiserver import KubeSim
from kubesim.prometheus import PrometheusServer
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES
from tests.support import API_CLIENT, eventually, import_order, wait_for

from .conftest import RULES, AdapterProcess

# What `kubernetes/__init__.py` and `kubernetes/aio/__init__.py` import that the adapter never uses
# (adapter/__main__.py: lean_packages), and what FastAPI imports for a parameter it models.
UNUSED = {"kubernetes.config", "kubernetes.dynamic", "kubernetes.stream", "kubernetes.leaderelection",
          "kubernetes.aio.dynamic", "kubernetes.aio.leaderelection", "requests", "urllib3", "jsonschema",
          "pydantic.v1",
          # what uvicorn's websocket protocol looks for: the adapter serves no websocket (ws="none")
          "websockets", "wsproto"}


def first(order: list[str], package: str) -> int:
    return next(i for i, name in enumerate(order) if name == package or name.startswith(package + "."))


def test_a_connected_start_imports_only_the_clients_asyncio_half(prometheus: PrometheusServer,
                                                                   tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(yaml.safe_load(RULES.read_text()) | {"resourceRules": DEFAULT_RESOURCE_RULES}))
    with KubeSim(ready_delay=0) as sim:
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules),
                            "--kubeconfig", sim.kubeconfig_path, env={"PYTHONPROFILEIMPORTTIME": "1"}) as a:
            a.wait_ready()
            # every group and the OpenAPI documents answered once: what serving imports counts too
            for path in ("/apis/custom.metrics.k8s.io/v1beta2", "/apis/metrics.k8s.io/v1beta1/nodes",
                         "/openapi/v3/apis/custom.metrics.k8s.io/v1beta2", "/readyz"):
                assert wait_for(lambda p=path: a.get(p).status_code == 200, timeout=15), path
            order = import_order(a.stderr())
    imported = set(order)
    assert {"kubernetes.aio.client.rest", "kubernetes.aio.config.kube_config", "fastapi"} <= imported
    assert imported & UNUSED == set()
    # the client's ApiClient (pydantic, dateutil: issue 28) is never imported: promscaler.kubeapi
    # builds its requests itself, and the kubeconfig loader is imported without it
    assert API_CLIENT & imported == set()
    # pydantic comes with FastAPI, imported once the adapter listens (adapter/cli.py: APP after SERVING,
    # whose modules are imported by name, so logged only through what they import: httptools)
    assert order.index("httptools") < first(order, "pydantic") < order.index("fastapi")


def test_the_launcher_imports_aiohttp_without_loading_cas_it_never_uses() -> None:
    # aiohttp's two import-time default contexts hold no CA (~90 ms of CPU saved); the variable
    # is put back, so a context built afterwards (the Prometheus client's, over https) loads them.
    code = """
import json, os, ssl
import adapter.__main__ as entry
entry.prepare()
import aiohttp.connector as c
from adapter.prometheus import PrometheusClient
from adapter.settings import parse_settings
p = PrometheusClient(parse_settings(["--prometheus-url", "https://prometheus.example:9090"]))
cas = lambda ctx: ctx.cert_store_stats()["x509_ca"]
print(json.dumps({"aiohttp": [cas(c._SSL_CONTEXT_VERIFIED), cas(c._SSL_CONTEXT_UNVERIFIED)], "client": cas(p._ssl),
                  "env": os.environ.get("SSL_CERT_FILE"), "system": cas(ssl.create_default_context())}))
"""
    env = {**os.environ, "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    out = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True, cwd=Path(__file__).parents[2]).stdout)
    assert out["aiohttp"] == [0, 0]
    assert out["env"] == "/etc/ssl/certs/ca-certificates.crt"
    assert out["client"] == out["system"] > 0


# The label `queue` names a resource only in the cluster below (a CRD); `namespace` and `pod` in both.
FIRST_RULES = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
- seriesQuery: 'queue_messages_ready'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""
QUEUES = Resource("example.com", "queues", "queue", "Queue", True, "v1")


def asked(metrics: SelfMetrics) -> dict[str, float]:
    """Prometheus API calls so far, by endpoint (the client's own count of what it sent)."""
    return {s.labels["endpoint"]: s.value for f in metrics.registry.collect() for s in f.samples
            if s.name == "promscaler_adapter_prometheus_query_duration_seconds_count"}


async def test_the_first_relist_takes_the_answers_asked_at_start(prometheus: PrometheusServer) -> None:
    config = parse_rules(FIRST_RULES)
    cluster = ResourceTable([*BUILTIN_TABLE.resources, QUEUES], "API discovery")
    settings = parse_settings(["--prometheus-url", prometheus.url])
    metrics = SelfMetrics()
    client = PrometheusClient(settings, metrics)
    plain = PrometheusClient(settings)
    try:
        # asked before the cluster's table is known: which labels name resources guessed from the built-in one
        first = FirstQuestions(client, compile_rules(config), None, 60)
        # names and labels of both queries, and which names of queue_messages_ready carry namespace
        # ('queue' is not guessed; every http_requests_total series has namespace and pod: not asked)
        await eventually(lambda: sum(asked(metrics).values()) == 2 + 2 + 1, timeout=10)
        before = asked(metrics)
        discovery = Discovery(compile_rules(config, cluster), client, relist_interval=60, aggregate=True,
                              metrics=metrics, first=first)
        assert await discovery.relist()
        during = {k: v - before.get(k, 0) for k, v in asked(metrics).items() if v != before.get(k, 0)}
        # the relist asked only who carries `queue`, which only the cluster's table names (and
        # checked the metricsQuery of each rule: format_query)
        assert during == {"label/__name__/values": 1, "format_query": 2}
        # the same catalogue as a relist that asks everything itself
        again = Discovery(compile_rules(config, cluster), plain, relist_interval=60, aggregate=True)
        assert await again.relist()
        assert discovery.catalogue.custom.keys() == again.catalogue.custom.keys()
        assert {("queues.example.com", "queue_messages_ready"), ("namespaces", "queue_messages_ready"),
                ("pods", "http_requests_total")} <= discovery.catalogue.custom.keys()
    finally:
        await client.aclose()
        await plain.aclose()


def gc_collections(metrics_text: str) -> float:
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "python_gc_collections":
            return sum(s.value for s in family.samples if s.labels.get("generation") == "0")
    raise AssertionError("no python_gc_collections_total in /metrics")


def test_the_collector_runs_once_the_adapter_serves(prometheus: PrometheusServer) -> None:
    # Start-up runs without it (adapter/__main__.py). A relist each second builds a new catalogue
    # while the old one is alive: enough for the youngest generation to be collected each time,
    # unless the collector stayed off.
    with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES),
                        "--metrics-relist-interval", "1s") as a:
        a.wait_ready()
        before = gc_collections(a.get("/metrics").text)
        assert wait_for(lambda: gc_collections(a.get("/metrics").text) > before, timeout=15)
        families = {f.name for f in text_string_to_metric_families(a.get("/metrics").text)}
    assert {"process_cpu_seconds", "process_resident_memory_bytes", "python_info"} <= families


def test_the_adapter_still_answers_openapi_by_path(adapter: AdapterProcess) -> None:
    doc = adapter.get("/openapi/v3/apis/custom.metrics.k8s.io/v1beta2")
    assert doc.status_code == 200 and doc.json()["openapi"].startswith("3.")
    missing = adapter.get("/openapi/v3/apis/nothing.example.com/v1")
    assert missing.status_code == 404 and missing.json()["kind"] == "Status"
    assert httpx.get(adapter.url + "/openapi/v3/apis/custom.metrics.k8s.io").status_code == 404


async def _answer(send, text: str) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": text.encode()})


async def test_the_front_serves_the_metrics_apis_while_the_app_is_built() -> None:
    events: list[str] = []

    async def startup() -> None:
        events.append("startup")

    async def shutdown() -> None:
        events.append("shutdown")

    async def hot(scope, receive, send) -> None:
        await _answer(send, f"hot {scope['path']}")

    async def app(scope, receive, send) -> None:
        await _answer(send, f"app {scope['path']}")

    front = Front(startup, shutdown)
    front.hot = hot
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front), base_url="http://adapter") as client:
        waiting = asyncio.create_task(client.get("/openapi/v2"))
        # the metrics APIs answer with no app yet; every other path waits for it
        hot_answer = await client.get("/apis/custom.metrics.k8s.io/v1beta2")
        assert hot_answer.text == "hot /apis/custom.metrics.k8s.io/v1beta2"
        assert not waiting.done()
        front.attach(app)
        assert (await waiting).text == "app /openapi/v2"
        assert (await client.get("/apis/custom.metrics.k8s.io")).text == "app /apis/custom.metrics.k8s.io"

    # the lifespan (discovery's loops) runs without the app
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[dict] = []

    async def receive() -> dict:
        return next(messages)

    async def send(message: dict) -> None:
        sent.append(message)

    await Front(startup, shutdown)({"type": "lifespan"}, receive, send)
    assert events == ["startup", "shutdown"]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


async def test_the_front_answers_the_probes_before_the_app_is_attached() -> None:
    # Ready means discovery has listed, not that FastAPI is imported: /readyz, /healthz and /livez
    # answer (Kubernetes' healthz format) while no app is attached, and other paths still wait for it.
    checks: list[tuple[str, str | None]] = [("prometheus", "discovery has not succeeded yet: waiting")]

    async def readiness() -> list[tuple[str, str | None]]:
        return checks

    async def nothing() -> None:
        pass

    front = Front(nothing, nothing)
    front.health = Health(readiness, insecure=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=front), base_url="http://adapter") as client:
        waiting = asyncio.create_task(client.get("/metrics"))
        not_ready = await asyncio.wait_for(client.get("/readyz?verbose"), 5)
        assert (not_ready.status_code, not_ready.text) == (
            503, "[+]ping ok\n[-]prometheus failed: discovery has not succeeded yet: waiting\nreadyz check failed\n")
        checks[0] = ("prometheus", None)
        ready = await asyncio.wait_for(client.get("/readyz"), 5)
        assert (ready.status_code, ready.text) == (200, "ok")
        live = await asyncio.wait_for(client.get("/livez?verbose"), 5)
        assert (live.status_code, live.text) == (200, "[+]ping ok\nlivez check passed\n")
        refused = await asyncio.wait_for(client.post("/healthz"), 5)
        assert refused.status_code == 405 and refused.json()["reason"] == "MethodNotAllowed"
        assert not waiting.done()
        front.attach(lambda scope, receive, send: _answer(send, f"app {scope['path']}"))
        assert (await waiting).text == "app /metrics"
