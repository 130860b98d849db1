"""A live moment written as a `simulate` scenario (the full form `simulate` reads), with the
recomputed decision as its `expect:`, so that `simulate --check` replays it."""

from __future__ import annotations

from typing import Any

from autoscaler.decision import ControllerConfig, Decision, MetricFailure
from autoscaler.decision.controls import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from promscaler.selectors import Operator, parse_selector

from .gather import Moment

__all__ = ["scenario"]

_PREFIX = "unable to fetch metrics from "


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _selected(item: dict[str, Any], selector: str | None) -> dict[str, Any]:
    """An external item with the labels the API's selector required: the API applied the selector
    (an aggregating query may return no labels at all), and `simulate` applies it again to the file."""
    labels = dict(item.get("metricLabels") or {})
    for req in parse_selector(selector).requirements:
        if req.key not in labels and req.operator in (Operator.EQUALS, Operator.IN, Operator.EXISTS):
            labels[req.key] = req.values[0] if req.values else ""
    return {**item, "metricLabels": labels}


def _config(config: ControllerConfig) -> dict[str, Any]:
    base, out = ControllerConfig(), {}
    if config.tolerance != base.tolerance:
        out["tolerance"] = str(config.tolerance)
    for key, attr in (("cpuInitializationPeriod", "cpu_initialization_period"),
                      ("initialReadinessDelay", "initial_readiness_delay"),
                      ("downscaleStabilizationWindow", "downscale_stabilization_window")):
        if getattr(config, attr) != getattr(base, attr):
            out[key] = f"{getattr(config, attr):g}s"
    return out


def _pause_annotations(meta: dict[str, Any]) -> dict[str, Any]:
    """The pause annotations (docs/controls.md), the only ones a decision reads."""
    kept = {k: v for k, v in (meta.get("annotations") or {}).items()
            if k in (PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION)}
    return {"annotations": kept} if kept else {}


def scenario(m: Moment, decision: Decision, config: ControllerConfig) -> dict[str, Any]:
    resource: list[Any] = []
    custom: list[Any] = []
    external: list[Any] = []
    for path, selector, body in m.answers:
        items = body.get("items") if "items" in body else [body]
        if path.startswith("/apis/metrics.k8s.io/"):
            resource += items or []
        elif path.startswith("/apis/custom.metrics.k8s.io/"):
            custom += items or []
        else:
            external += [_selected(item, selector) for item in items or []]
    failures = []
    for ms, reading in zip(m.spec.metrics, m.readings, strict=False):
        if isinstance(reading, MetricFailure) and reading.message.startswith(_PREFIX):
            message = reading.message.split(": ", 1)[-1]
            failures.append({"type": ms.type, "name": ms.name, "message": message})
    metrics: dict[str, Any] = {k: v for k, v in (("resource", resource), ("custom", custom), ("external", external),
                                                 ("failures", failures)) if v}
    meta = m.obj.get("metadata") or {}
    doc: dict[str, Any] = {
        "now": m.now.isoformat().replace("+00:00", "Z"),
        "hpa": {"apiVersion": m.obj["apiVersion"], "kind": m.obj["kind"],
                "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                             **_pause_annotations(meta)},
                "spec": m.obj.get("spec"), "status": m.obj.get("status") or {}},
        "scaleTarget": {"spec": {"replicas": m.scale.replicas},
                        "status": {"replicas": m.scale.status_replicas, "selector": m.scale.selector}},
        "pods": [_strip(p) for p in m.pods_raw],
        "metrics": metrics,
        # explain assumes no earlier recommendations and no scale events: the same here
        "history": {"recommendations": [], "scaleUpEvents": [], "scaleDownEvents": []},
        "expect": {"desiredReplicas": decision.desired_replicas, "recommendation": decision.recommendation,
                   "scale": decision.scale,
                   "conditions": {c.type: c.reason for c in decision.conditions}},
    }
    config_doc = _config(config)
    if config_doc:
        doc["config"] = config_doc
    return doc
