"""/healthz, /readyz and /metrics of the controller, and the metrics it exports.

One registry per controller (not the global one), so tests can run several controllers in one
process. In dry-run, every native HPA's decision is exported next to the cluster HPA's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from promscaler.buildinfo import register_build_info
from promscaler.quantity import QuantityError, parse_quantity
from promscaler.times import parse_time

WorkKey = tuple[str, str, str]
Obj = dict[str, Any]
QUEUE = "horizontalautoscalers"


_KSM = "promscaler_horizontalautoscaler_"  # kube-state-metrics' kube_horizontalpodautoscaler_* series, same meaning
_AS = ["kind", "namespace", "horizontalautoscaler"]
_SOURCES = {"Object": "object", "Pods": "pods", "Resource": "resource", "ContainerResource": "containerResource",
            "External": "external"}
_TARGET_TYPES = {"Value": ("value", "value"), "AverageValue": ("average", "averageValue"),
                 "Utilization": ("utilization", "averageUtilization")}


def _number(value: Any) -> float | None:
    try:
        return float(parse_quantity(value)) if value is not None else None
    except QuantityError:
        return None


def metric_series(spec: Obj, status: Obj) -> list[tuple[str, str, float | None, float | None]]:
    """(metric_name, metric_target_type, target, current) per spec metric, as kube-state-metrics
    names them (`average`, `value`, `utilization`); current from status.currentMetrics."""
    current = status.get("currentMetrics") or []
    out = []
    for i, m in enumerate(spec.get("metrics") or ()):
        source = _SOURCES.get(str(m.get("type")), "")
        block = m.get(source) or {}
        resource = source in ("resource", "containerResource")
        name = block.get("name") if resource else (block.get("metric") or {}).get("name")
        ttype, field = _TARGET_TYPES.get(str((block.get("target") or {}).get("type")), ("", ""))
        if not name or not ttype:
            continue
        cur = (((current[i].get(source) or {}).get("current") or {}) if i < len(current) else {}).get(field)
        out.append((str(name), ttype, _number((block.get("target") or {}).get(field)), _number(cur)))
    return out


@dataclass(slots=True)
class _Row:
    """One autoscaler's series: None leaves a series out."""

    current: float | None = None
    desired: float | None = None
    min: float | None = None
    max: float | None = None
    metrics: tuple[tuple[str, str, float | None, float | None], ...] = ()  # name, target type, target, current
    conditions: tuple[tuple[str, str], ...] = ()  # type, status in lower case
    limited: tuple[tuple[str, float], ...] = ()   # ScalingLimited's reason, 1 when True
    last_scale: float | None = None


class AutoscalerSeries(Collector):
    """The per-autoscaler series (kube-state-metrics' names and labels), from one row each."""

    def __init__(self) -> None:
        self.rows: dict[WorkKey, _Row] = {}

    def row(self, key: WorkKey) -> _Row:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = _Row()
        return row

    def collect(self) -> Iterator[Metric]:
        def family(name: str, doc: str, *labels: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(_KSM + name, doc, labels=[*_AS, *labels])

        fam = {
            "min": family("spec_min_replicas", "Lower limit for the number of replicas."),
            "max": family("spec_max_replicas", "Upper limit for the number of replicas."),
            "current": family("status_current_replicas", "Current number of replicas of the scale target."),
            "desired": family("status_desired_replicas", "Desired number of replicas (this controller's decision)."),
        }
        target = family("spec_target_metric", "The metric target the autoscaler aims at.",
                        "metric_name", "metric_target_type")
        value = family("status_target_metric", "The current value of the metric, as last read.",
                       "metric_name", "metric_target_type")
        condition = family("status_condition", "The autoscaler's conditions (1 for the current status).",
                           "condition", "status")
        limited = family("status_scaling_limited",
                         "1 while the desired replicas are limited (by min/max or a scaling policy), by reason.",
                         "reason")
        last_scale = family("status_last_scale_time_seconds", "When the target was last scaled (Unix time).")
        for key, row in list(self.rows.items()):
            labels = list(key)
            for name, gauge in fam.items():
                number = getattr(row, name)
                if number is not None:
                    gauge.add_metric(labels, number)
            for name, ttype, goal, current in row.metrics:
                if goal is not None:
                    target.add_metric([*labels, name, ttype], goal)
                if current is not None:
                    value.add_metric([*labels, name, ttype], current)
            for ctype, status in row.conditions:
                for state in ("true", "false", "unknown"):
                    condition.add_metric([*labels, ctype, state], 1.0 if status == state else 0.0)
            for reason, on in row.limited:
                limited.add_metric([*labels, reason], on)
            if row.last_scale is not None:
                last_scale.add_metric(labels, row.last_scale)
        yield from (fam["current"], fam["desired"], fam["min"], fam["max"], target, value, condition, limited,
                    last_scale)


class Telemetry:
    """The controller's Prometheus metrics; implements reconcile.Observer and queue.QueueMetrics."""

    def __init__(self, shadow: bool = False, sharding: bool = False) -> None:
        """`shadow`: dry-run, which exports the shadow comparison series; `sharding`: the shard
        series (each declared only then, so no family is ever empty)."""
        self.registry = CollectorRegistry()
        r = self.registry
        register_build_info(r, "autoscaler")
        self.reconcile_seconds = Histogram(
            "promscaler_autoscaler_reconcile_duration_seconds", "Time to sync one autoscaler.", registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.reconciles = Counter("promscaler_autoscaler_reconciles", "Autoscaler syncs.", ["kind"], registry=r)
        self.stale_skips = Counter("promscaler_autoscaler_stale_sync_skips",
                                   "Syncs deferred because the cache had not yet seen the controller's own last "
                                   "status write (Kubernetes 1.37).", ["kind"], registry=r)
        self.errors = Counter("promscaler_autoscaler_reconcile_errors", "Autoscaler syncs that failed, by reason.",
                              ["kind", "reason"], registry=r)
        # Per autoscaler, named after kube-state-metrics' HPA series (kube_horizontalpodautoscaler_*):
        # one compact row each, turned into samples at scrape time (a labelled child per series
        # would cost ~10 KB per autoscaler)
        self.autoscalers = AutoscalerSeries()
        r.register(self.autoscalers)
        shadow_registry = r if shadow else None
        self.shadow_desired = Gauge(
            "promscaler_autoscaler_shadow_desired_replicas",
            "Dry-run: desired replicas per native HPA, by source (promscaler or the cluster's HPA controller).",
            ["namespace", "name", "source"], registry=shadow_registry)
        self.shadow_disagree = Gauge("promscaler_autoscaler_shadow_disagreement",
                                     "Dry-run: 1 when promscaler's decision differs from the cluster HPA's.",
                                     ["namespace", "name"], registry=shadow_registry)
        self.leader = Gauge("promscaler_autoscaler_leader", "1 while this instance holds the leader lease.", registry=r)
        shard_registry = r if sharding else None
        self.shard_owned = Gauge("promscaler_autoscaler_shard_owned_objects",
                                 "Sharding: objects this replica owns and reconciles now, by kind.", ["kind"],
                                 registry=shard_registry)
        self.shard_handovers = Counter("promscaler_autoscaler_shard_handovers",
                                       "Sharding: objects this replica gained or lost on a membership change.",
                                       ["direction"], registry=shard_registry)
        self.shard_member = Gauge("promscaler_autoscaler_shard_member",
                                  "Sharding: 1 per live member of the shard group, as this replica sees it.",
                                  ["identity"], registry=shard_registry)
        self.shard_active = Gauge("promscaler_autoscaler_shard_active",
                                  "Sharding: 1 while this replica may act (its Lease renewed, every peer agreeing).",
                                  registry=shard_registry)
        # The opt-in controls (docs/controls.md), from status.control; per autoscaler, the Fallback and
        # Paused conditions are in status_condition above.
        self.fallbacks = Counter("promscaler_autoscaler_fallbacks",
                                 "Times an autoscaler went to its fallback count (no metric readable).", registry=r)
        self.fallback_syncs = Counter("promscaler_autoscaler_fallback_syncs",
                                      "Syncs decided by the fallback count.", registry=r)
        self.pauses = Counter("promscaler_autoscaler_pauses", "Times an autoscaler was paused by annotation.",
                              registry=r)
        self.in_fallback = Gauge("promscaler_autoscaler_in_fallback",
                                 "Autoscalers deciding by their fallback count now.", registry=r)
        self.paused = Gauge("promscaler_autoscaler_paused", "Autoscalers paused by annotation now.", registry=r)
        self._fallback_keys: set[WorkKey] = set()
        self._paused_keys: set[WorkKey] = set()
        # client-go's workqueue metrics, same names and meaning (name="horizontalautoscalers").
        q = ["name"]
        self.queue_depth = Gauge("workqueue_depth", "Current depth of workqueue.", q, registry=r).labels(QUEUE)
        self.queue_adds = Counter("workqueue_adds", "Total number of adds handled by workqueue.", q,
                                  registry=r).labels(QUEUE)
        self.queue_retries = Counter("workqueue_retries", "Total number of retries handled by workqueue.", q,
                                     registry=r).labels(QUEUE)
        buckets = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10)  # client-go's ExponentialBuckets(1e-8, 10, 10)
        self.queue_latency = Histogram("workqueue_queue_duration_seconds",
                                       "How long in seconds an item stays in workqueue before being requested.", q,
                                       buckets=buckets, registry=r).labels(QUEUE)
        self.work_duration = Histogram("workqueue_work_duration_seconds",
                                       "How long in seconds processing an item from workqueue takes.", q,
                                       buckets=buckets, registry=r).labels(QUEUE)

    # --- queue.QueueMetrics -------------------------------------------------------------------

    def added(self) -> None:
        self.queue_adds.inc()

    def depth(self, n: int) -> None:
        self.queue_depth.set(n)

    def queued(self, seconds: float) -> None:
        self.queue_latency.observe(seconds)

    def worked(self, seconds: float) -> None:
        self.work_duration.observe(seconds)

    def retried(self) -> None:
        self.queue_retries.inc()

    # --- reconcile.Observer ---------------------------------------------------------------------

    def synced(self, key: WorkKey, seconds: float, error: str | None) -> None:
        self.reconcile_seconds.observe(seconds)
        self.reconciles.labels(key[0]).inc()
        if error is not None:
            self.errors.labels(key[0], error.split(":", 1)[0]).inc()

    def replicas(self, key: WorkKey, current: int, desired: int) -> None:
        row = self.autoscalers.row(key)
        row.current, row.desired = float(current), float(desired)

    def status(self, key: WorkKey, spec: Obj, status: Obj) -> None:
        """Spec limits, metric targets and readings, conditions and last scale time of one autoscaler,
        from what the controller writes into its status."""
        row = self.autoscalers.row(key)
        row.min, row.max = float(spec.get("minReplicas", 1)), _number(spec.get("maxReplicas"))
        row.current, row.desired = _number(status.get("currentReplicas")), _number(status.get("desiredReplicas"))
        row.metrics = tuple(metric_series(spec, status))
        conditions, limited = [], []
        for cond in status.get("conditions") or ():
            conditions.append((str(cond.get("type", "")), str(cond.get("status", "")).lower()))
            if cond.get("type") == "ScalingLimited":
                limited.append((str(cond.get("reason", "")), 1.0 if cond.get("status") == "True" else 0.0))
        row.conditions, row.limited = tuple(conditions), tuple(limited)
        stamp = status.get("lastScaleTime")
        row.last_scale = parse_time(stamp).timestamp() if stamp else None
        self._controls(key, str(status.get("control") or ""))

    def _controls(self, key: WorkKey, control: str) -> None:
        if control == "Fallback":
            self.fallback_syncs.inc()
            if key not in self._fallback_keys:
                self.fallbacks.inc()
        if control.startswith("Paused") and key not in self._paused_keys:
            self.pauses.inc()
        self._mark(self._fallback_keys, key, control == "Fallback")
        self._mark(self._paused_keys, key, control.startswith("Paused"))

    def _mark(self, keys: set[WorkKey], key: WorkKey, on: bool) -> None:
        if on:
            keys.add(key)
        else:
            keys.discard(key)
        self.in_fallback.set(len(self._fallback_keys))
        self.paused.set(len(self._paused_keys))

    def shadow(self, key: WorkKey, ours: int, cluster: int | None) -> None:
        _, ns, name = key
        self.shadow_desired.labels(ns, name, "promscaler").set(ours)
        if cluster is not None:
            self.shadow_desired.labels(ns, name, "cluster").set(cluster)
            self.shadow_disagree.labels(ns, name).set(1 if cluster != ours else 0)

    def forget(self, key: WorkKey) -> None:
        self.autoscalers.rows.pop(key, None)
        self._controls(key, "")
        for labels in ((key[1], key[2], "promscaler"), (key[1], key[2], "cluster")):
            with contextlib.suppress(KeyError):
                self.shadow_desired.remove(*labels)
        with contextlib.suppress(KeyError):
            self.shadow_disagree.remove(key[1], key[2])


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
