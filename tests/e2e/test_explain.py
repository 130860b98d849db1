"""`autoscaler explain` against the sandbox with the real adapter process: the recomputed decision
matches the controller's own for the same moment (the status it wrote, with its sync stopped
so that the moment holds), for a Pods metric on a HorizontalAutoscaler and an External metric on
a native HPA; `--capture` replays with `simulate --check`; errors are one line."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import httpx
import pytest
import yaml

from autoscaler.decision import ControllerConfig
from autoscaler.explain import cli
from autoscaler.simulate import cli as simulate_cli
from promscaler.quantity import parse_quantity

from .conftest import NS, controller, eventually
from .test_used_by import autoscaler, current_average, deployment, replicas

pytestmark = pytest.mark.e2e


def status(sim, kind: str, name: str) -> dict:
    api = "promscaler.io/v1alpha1" if kind == "HorizontalAutoscaler" else "autoscaling/v2"
    return (sim.get(api, kind, NS, name) or {}).get("status") or {}


async def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(cli.main, list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def test_pods_metric_on_a_horizontalautoscaler_matches_the_controller(world, tmp_path: Path):
    sim, exporter = world
    sim.apply(deployment("web", 1))
    exporter.load["web"] = 4.0  # 4 req/s spread over the ready pods; 1 per pod wanted -> 4
    metric = {"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                       "target": {"type": "AverageValue", "averageValue": "1"}}}
    sim.apply(autoscaler("web", metric))
    async with controller(sim):
        def settled() -> bool:
            st = status(sim, "HorizontalAutoscaler", "web")
            avg = current_average(sim, "web")
            return (replicas(sim, "web") == 4 and st.get("desiredReplicas") == 4 and st.get("currentReplicas") == 4
                    and avg is not None and abs(avg - 1.0) <= 0.05)
        await eventually(settled, timeout=60)
    # The controller is stopped: its last status is the decision for this moment (the load is constant).
    theirs = status(sim, "HorizontalAutoscaler", "web")
    capture = tmp_path / "web.yaml"
    code, out, err = await run_cli("web", "-n", NS, "--kubeconfig", sim.kubeconfig_path, "-o", "json",
                                   "--capture", str(capture))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["object"] == {"kind": "HorizontalAutoscaler", "namespace": NS, "name": "web"}
    assert doc["decision"]["desiredReplicas"] == theirs["desiredReplicas"] == 4
    assert doc["decision"]["proposals"] == [{"type": "Pods", "name": "http_requests", "replicas": 4}]
    assert not [d for d in doc["differences"] if d["field"] == "desiredReplicas"]
    assert doc["target"]["pods"] == 4 and doc["assumed"]
    # the per-pod value it used: the load spread over the 4 pods, within the tolerance
    average = float(parse_quantity(doc["decision"]["currentMetrics"][0]["pods"]["current"]["averageValue"]))
    assert abs(average - 1.0) <= 0.1
    captured = yaml.safe_load(capture.read_text())
    # the short form: four identical ready pods, one value each (the values the adapter served)
    assert captured["pods"]["count"] == captured["pods"]["ready"] == len(exporter.ready_pods("web")) == 4
    assert len(captured["metrics"]["http_requests"]) == 4

    sim_out, sim_err = io.StringIO(), io.StringIO()
    assert simulate_cli.main(["--check", str(capture)], sim_out, sim_err) == 0, sim_out.getvalue() + sim_err.getvalue()
    assert sim_out.getvalue().strip().endswith(": ok")

    code, text, _ = await run_cli("web", "-n", NS, "--kubeconfig", sim.kubeconfig_path)
    assert code == 0
    assert "Pods http_requests" in text and "HorizontalAutoscaler default/web (live)" in text
    assert "assumed:" in text


async def test_external_metric_on_a_native_hpa_matches_the_controller(world, tmp_path: Path):
    sim, exporter = world
    sim.apply(deployment("worker", 1))
    exporter.queues["worker_tasks"] = 150  # 30 per worker wanted -> 5
    hpa = autoscaler("worker", {"type": "External", "external": {
        "metric": {"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "worker_tasks"}}},
        "target": {"type": "AverageValue", "averageValue": "30"}}})
    hpa.update(apiVersion="autoscaling/v2", kind="HorizontalPodAutoscaler")
    sim.apply(hpa)
    async with controller(sim, reconcile_native_hpas=True):
        def settled() -> bool:
            st = status(sim, "HorizontalPodAutoscaler", "worker")
            return replicas(sim, "worker") == 5 and st.get("desiredReplicas") == 5 and st.get("currentReplicas") == 5
        await eventually(settled)
    theirs = status(sim, "HorizontalPodAutoscaler", "worker")
    capture = tmp_path / "worker.yaml"
    code, out, err = await run_cli("worker", "-n", NS, "--kind", "hpa", "--kubeconfig", sim.kubeconfig_path,
                                   "-o", "yaml", "--capture", str(capture))
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["object"]["kind"] == "HorizontalPodAutoscaler"
    assert doc["decision"]["desiredReplicas"] == theirs["desiredReplicas"] == 5
    assert doc["decision"]["proposals"] == [{"type": "External", "name": "queue_messages_ready", "replicas": 5}]
    current = doc["decision"]["currentMetrics"][0]["external"]["current"]
    assert float(parse_quantity(current["averageValue"])) == 30.0  # 150 / 5, as the controller wrote it
    assert doc["differences"] == []
    # the same moment asked of Prometheus directly: the queue is 150
    body = httpx.get(f"{exporter.prometheus_url}/api/v1/query",
                     params={"query": 'sum(queue_messages_ready{queue="worker_tasks"})'}, timeout=10).json()
    assert float(body["data"]["result"][0]["value"][1]) == 150.0
    out_buf = io.StringIO()
    assert simulate_cli.main(["--check", str(capture)], out_buf, io.StringIO()) == 0, out_buf.getvalue()

    # the load changes and no controller runs: explain says what it would do and why the status differs
    exporter.queues["worker_tasks"] = 300
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:  # until a scrape has seen the new backlog
        _, d, diffs = await cli.explain(sim.kubeconfig_path, None, "hpa", NS, "worker", ControllerConfig())
        if d.desired_replicas == 10 or loop.time() > deadline:
            break
        await asyncio.sleep(0.5)
    assert d.desired_replicas == 10  # 300 / 30
    assert [x.field for x in diffs if x.field == "desiredReplicas"] == ["desiredReplicas"]
    assert any("metrics moved" in r for x in diffs for r in x.reasons)


async def test_errors_are_one_line_naming_the_object_and_the_api(world):
    sim, _ = world
    code, out, err = await run_cli("nope", "-n", NS, "--kubeconfig", sim.kubeconfig_path)
    assert code == 1 and out == ""
    assert err.count("\n") == 1
    assert "HorizontalAutoscaler default/nope" in err and "promscaler.io/v1alpha1" in err and "not found" in err

    sim.apply(deployment("lonely", 1))
    sim.apply(autoscaler("lonely", {"type": "External", "external": {
        "metric": {"name": "no_such_metric"}, "target": {"type": "AverageValue", "averageValue": "1"}}}))
    code, out, err = await run_cli("lonely", "-n", NS, "--kubeconfig", sim.kubeconfig_path)
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "HorizontalAutoscaler default/lonely" in lines[0] and "external metrics API" in lines[0]
    assert "no_such_metric" in lines[0]
