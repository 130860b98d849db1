"""Fixtures: a KubeSim cluster with the CRD, a fake metrics upstream behind its aggregation, and
controllers run in the test's event loop against the sim through the real kubernetes client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.controller.controller import Controller, Settings
from autoscaler.decision.model import ControllerConfig
from kubesim.apiserver import KubeSim
from promscaler.kubeapi import Kube, load_configuration
from promscaler.selectors import parse_selector

from ..support import eventually, more_syncs, running  # noqa: F401  (used by the tests through this module)
from .fakemetrics import FakeMetrics

ROOT = Path(__file__).resolve().parents[2]
NS = "default"
CR_API = ("promscaler.io/v1alpha1", "HorizontalAutoscaler")


@pytest.fixture
def sim():
    with KubeSim(ready_delay=0.0) as s:
        s.apply(yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text()))
        yield s


def pods_matching(sim: KubeSim, ns: str, selector: str) -> list[str]:
    sel = parse_selector(selector)
    return sorted(p["metadata"]["name"] for p in sim.list("v1", "Pod", ns)
                  if sel.matches(p["metadata"].get("labels") or {}) and not p["metadata"].get("deletionTimestamp"))


@contextlib.contextmanager
def metrics_upstream(sim: KubeSim) -> Iterator[FakeMetrics]:
    """A fake metrics upstream for `sim`'s pods behind its custom and external aggregation: one set-up
    for the clusters with the CRD and those without."""
    f = FakeMetrics(lambda ns, sel: pods_matching(sim, ns, sel)).start()
    sim.set_aggregated_api("custom.metrics.k8s.io", f.url)
    sim.set_aggregated_api("external.metrics.k8s.io", f.url)
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture
def fake(sim):
    with metrics_upstream(sim) as f:
        yield f


def deployment(name: str, replicas: int, ns: str = NS) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "500m"}}}]},
            },
        },
    }


def autoscaler(
    name: str,
    target: str,
    metrics: list[dict[str, Any]],
    *,
    min_replicas: int = 1,
    max_replicas: int = 10,
    behavior: dict[str, Any] | None = None,
    ns: str = NS,
    kind: str = "HorizontalAutoscaler",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                            "minReplicas": min_replicas, "maxReplicas": max_replicas, "metrics": metrics}
    if behavior is not None:
        spec["behavior"] = behavior
    api = "promscaler.io/v1alpha1" if kind == "HorizontalAutoscaler" else "autoscaling/v2"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec}


def pods_metric(name: str, average: str) -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": average}},
    }


def external_metric(name: str, average: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    metric: dict[str, Any] = {"name": name}
    if labels:
        metric["selector"] = {"matchLabels": labels}
    return {
        "type": "External",
        "external": {"metric": metric, "target": {"type": "AverageValue", "averageValue": average}},
    }


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = dict(
        sync_period=0.3,
        workers=2,
        leader_elect=False,
        http_port=None,
        lease_namespace=NS,
        config=ControllerConfig(
            downscale_stabilization_window=0.0, initial_readiness_delay=0.0, cpu_initialization_period=0.0
        ),
    )
    base.update(overrides)
    return Settings(**base)


@contextlib.asynccontextmanager
async def sharded(sim: KubeSim, members: Sequence[str], prepare: Callable[[list[Controller]], None] | None = None,
                  **overrides: Any) -> AsyncIterator[list[Controller]]:
    """A sharding controller for each of `members` (its identity; `overrides`: more settings) in this
    loop, each with its own API client; `prepare` sees them before they start. The block starts once
    each has seen them all; on exit all are stopped and their clients closed."""
    kubes = [Kube(await load_configuration(sim.kubeconfig_path)) for _ in members]
    lease = dict(lease_duration=3.0, renew_deadline=2.0, retry_period=0.3, lease_name="promscaler-test")
    controllers = [Controller(k, settings(identity=m, sharding=True, **lease, **overrides))
                   for m, k in zip(members, kubes, strict=True)]
    if prepare is not None:
        prepare(controllers)
    stops = [asyncio.Event() for _ in members]
    tasks = [asyncio.create_task(c.run(s)) for c, s in zip(controllers, stops, strict=True)]
    try:
        await eventually(lambda: all(c.members and c.members.active() and len(c.members.view()) == len(members)
                                     for c in controllers), timeout=20)
        yield controllers
    finally:
        for s in stops:
            s.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for k in kubes:
            await k.close()


def replicas(sim: KubeSim, name: str, ns: str = NS) -> int:
    obj = sim.get("apps/v1", "Deployment", ns, name)
    assert obj is not None, f"no Deployment {ns}/{name}"
    return int(obj["spec"]["replicas"])


def status(sim: KubeSim, name: str, ns: str = NS, api: tuple[str, str] = CR_API) -> dict[str, Any]:
    obj = sim.get(api[0], api[1], ns, name) or {}
    return obj.get("status") or {}


def conditions(sim: KubeSim, name: str, ns: str = NS) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status(sim, name, ns).get("conditions") or []}


def events(sim: KubeSim, name: str, ns: str = NS) -> list[tuple[str, str, str]]:
    return [(e.get("type", ""), e.get("reason", ""), e.get("message", "")) for e in sim.list("v1", "Event", ns)
            if (e.get("involvedObject") or {}).get("name") == name]
