"""/healthz, /readyz and /metrics of the controller, and the metrics it exports.

One registry per controller (not the global one), so tests can run several controllers in one
process. In dry-run, every native HPA's decision is exported next to the cluster HPA's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

WorkKey = tuple[str, str, str]


class Telemetry:
    """The controller's Prometheus metrics; implements reconcile.Observer."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconcile_seconds = Histogram(
            "promscaler_autoscaler_reconcile_duration_seconds", "Time to sync one autoscaler.", registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.reconciles = Counter("promscaler_autoscaler_reconciles", "Autoscaler syncs.", ["kind"], registry=r)
        self.errors = Counter("promscaler_autoscaler_reconcile_errors", "Autoscaler syncs that failed.", ["kind", "reason"], registry=r)
        self.current = Gauge("promscaler_autoscaler_current_replicas", "The target's replicas at the last sync.",
                             ["kind", "namespace", "name"], registry=r)
        self.desired = Gauge("promscaler_autoscaler_desired_replicas", "The replicas this controller decided at the last sync.",
                             ["kind", "namespace", "name"], registry=r)
        self.shadow_desired = Gauge(
            "promscaler_autoscaler_shadow_desired_replicas",
            "Dry-run: desired replicas per native HPA, by source (promscaler or the cluster's HPA controller).",
            ["namespace", "name", "source"], registry=r)
        self.shadow_disagree = Gauge("promscaler_autoscaler_shadow_disagreement",
                                     "Dry-run: 1 when promscaler's decision differs from the cluster HPA's.",
                                     ["namespace", "name"], registry=r)
        self.queue_depth = Gauge("promscaler_autoscaler_queue_depth", "Autoscalers waiting in the work queue.", registry=r)
        self.leader = Gauge("promscaler_autoscaler_leader", "1 while this instance holds the leader lease.", registry=r)

    def synced(self, key: WorkKey, seconds: float, error: str | None) -> None:
        self.reconcile_seconds.observe(seconds)
        self.reconciles.labels(key[0]).inc()
        if error is not None:
            self.errors.labels(key[0], error.split(":", 1)[0]).inc()

    def replicas(self, key: WorkKey, current: int, desired: int) -> None:
        self.current.labels(*key).set(current)
        self.desired.labels(*key).set(desired)

    def shadow(self, key: WorkKey, ours: int, cluster: int | None) -> None:
        _, ns, name = key
        self.shadow_desired.labels(ns, name, "promscaler").set(ours)
        if cluster is not None:
            self.shadow_desired.labels(ns, name, "cluster").set(cluster)
            self.shadow_disagree.labels(ns, name).set(1 if cluster != ours else 0)

    def forget(self, key: WorkKey) -> None:
        for gauge in (self.current, self.desired):
            try:
                gauge.remove(*key)
            except KeyError:
                pass
        for labels in ((key[1], key[2], "promscaler"), (key[1], key[2], "cluster")):
            try:
                self.shadow_desired.remove(*labels)
            except KeyError:
                pass
        try:
            self.shadow_disagree.remove(key[1], key[2])
        except KeyError:
            pass


def create_app(telemetry: Telemetry, ready: Callable[[], bool], refresh: Callable[[], None] = lambda: None,
               shadow: Callable[[], dict[str, Any]] | None = None) -> FastAPI:
    """`ready()` is true once the caches have synced; `refresh()` updates gauges before a scrape;
    `shadow()` is shadow mode's summary for /debug/shadow (404 when not in shadow mode)."""
    app = FastAPI(title="promscaler autoscaler", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    @app.get("/readyz")
    async def readyz() -> Response:
        if ready():
            return Response("ok", media_type="text/plain")
        return Response("informer caches not synced", status_code=503, media_type="text/plain")

    @app.get("/metrics")
    async def metrics() -> Response:
        refresh()
        return Response(generate_latest(telemetry.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/debug/shadow")
    async def debug_shadow(format: str = "text") -> Response:
        if shadow is None:
            return Response("not in shadow mode (--dry-run --reconcile-native-hpas)\n", status_code=404,
                            media_type="text/plain")
        from .shadow import render_summary

        summary = shadow()
        if format == "json":
            return JSONResponse(summary)
        return Response(render_summary(summary), media_type="text/plain")

    return app
