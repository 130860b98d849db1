"""Watching the demo through the Kubernetes API, as `kubectl` would: the autoscalers' status,
their targets' replicas, Events, and the metrics exactly as the aggregation layer serves them.

Works the same against the sandbox and a real cluster (it only needs a kubeconfig).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from autoscaler.demo.scenario import AUTOSCALER_API, NAMESPACE, QUEUE, Workload
from promscaler.kubeapi import ApiError, Kube
from promscaler.quantity import parse_quantity

_PLURAL = "horizontalautoscalers"


@dataclass(slots=True)
class Sample:
    """One workload at one instant (`t`: seconds since the demo started)."""

    t: float
    load: float                       # the load profile's value (requests/s or messages/s produced)
    metric: float | None              # what the autoscaler compares with the target (per-pod average)
    served: float | None              # the metrics API's answer (web: mean over pods; worker: queue length)
    target: float
    replicas: int | None              # the target's spec.replicas (its scale)
    ready: int | None                 # readyReplicas
    desired: int | None               # autoscaler status.desiredReplicas
    conditions: list[dict[str, str]] = field(default_factory=list)
    reason: str = ""                  # the latest decision's one-line reason
    metric_error: str | None = None
    truth: float | None = None        # the simulation's own number (worker: true queue length)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ReplicaChange:
    t: float
    before: int
    after: int
    reason: str


def _num(q: Any) -> float:
    return float(parse_quantity(q))


def decision_reason(autoscaler: dict[str, Any] | None, events: list[dict[str, Any]]) -> str:
    """A one-line account of the autoscaler's latest decision, from what the controller wrote.

    The status conditions describe the latest sync (unable, stabilized, limited, or steady); right
    after a rescale, the rescale Event says why it changed the scale."""
    status = (autoscaler or {}).get("status") or {}
    conds = {c.get("type"): c for c in status.get("conditions") or ()}

    def say(c: dict[str, Any]) -> str:
        return f"{c.get('reason')}: {c.get('message', '')}".strip()

    for kind in ("ScalingActive", "AbleToScale"):
        c = conds.get(kind)
        if c and c.get("status") == "False":
            return say(c)
    able, limited = conds.get("AbleToScale"), conds.get("ScalingLimited")
    if able and able.get("reason") in ("ScaleDownStabilized", "ScaleUpStabilized"):
        return say(able)
    if limited and limited.get("status") == "True":
        return say(limited)
    if able and able.get("reason") == "SucceededRescale" and events:
        return say(events[-1])
    if able:
        return say(able)
    return say(events[-1]) if events else "waiting for the first decision"


def _event_key(ev: dict[str, Any]) -> tuple[str, int]:
    return ((ev.get("metadata") or {}).get("uid") or (ev.get("metadata") or {}).get("name") or "",
            int(ev.get("count") or 1))


class Monitor:
    """Samples every workload once per call; remembers replica changes and their reasons."""

    def __init__(self, kube: Kube, workloads: tuple[Workload, ...], load_of: Callable[[Workload, float], float],
                 truth_of: Callable[[Workload], float | None] = lambda w: None, namespace: str = NAMESPACE) -> None:
        self.kube, self.workloads, self.load_of, self.truth_of = kube, workloads, load_of, truth_of
        self.namespace = namespace
        self.timeline: dict[str, list[Sample]] = {w.name: [] for w in workloads}
        self.changes: dict[str, list[ReplicaChange]] = {w.name: [] for w in workloads}
        self.latest: dict[str, Sample] = {}
        self._used_events: set[tuple[str, int]] = set()
        self._pending: dict[str, list[tuple[int, int]]] = {w.name: [] for w in workloads}  # (index, samples waited)

    async def _get(self, path: str, query: list[tuple[str, Any]] | None = None) -> dict[str, Any] | None:
        try:
            return await self.kube.get(path, query)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _served(self, w: Workload) -> tuple[float | None, str | None]:
        ns = self.namespace
        try:
            if w.metric_type == "Pods":
                body = await self.kube.get(f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/*/{w.metric}",
                                           [("labelSelector", f"app={w.name}")])
                values = [_num(i["value"]) for i in body.get("items") or ()]
                return (sum(values) / len(values) if values else None), (None if values else "no pods reported")
            body = await self.kube.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{w.metric}",
                                       [("labelSelector", f"queue={QUEUE}")])
            values = [_num(i["value"]) for i in body.get("items") or ()]
            return (sum(values) if values else None), (None if values else "no series")
        except ApiError as exc:
            return None, f"{exc.status} {exc.reason}: {exc.message}"
        except Exception as exc:  # connection trouble: show it, keep sampling
            return None, f"{type(exc).__name__}: {exc}"

    async def _one(self, w: Workload, t: float) -> Sample:
        ns = self.namespace
        group, version = AUTOSCALER_API.split("/")
        hpa, dep, events, (served, err) = await asyncio.gather(
            self._get(f"/apis/{group}/{version}/namespaces/{ns}/{_PLURAL}/{w.name}"),
            self._get(f"/apis/apps/v1/namespaces/{ns}/deployments/{w.name}"),
            self._get(f"/api/v1/namespaces/{ns}/events"),
            self._served(w),
        )
        mine = sorted((e for e in (events or {}).get("items") or ()
                       if (e.get("involvedObject") or {}).get("name") == w.name
                       and (e.get("involvedObject") or {}).get("kind") == "HorizontalAutoscaler"),
                      key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "",
                                     int((e.get("metadata") or {}).get("resourceVersion") or 0)))
        status = (hpa or {}).get("status") or {}
        replicas = ((dep or {}).get("spec") or {}).get("replicas")
        metric = served
        if served is not None and w.metric_type == "External":
            # External AverageValue: the controller divides by the target's status.replicas.
            current = ((dep or {}).get("status") or {}).get("replicas") or replicas or 1
            metric = served / max(1, current)
        sample = Sample(
            t=round(t, 2), load=round(self.load_of(w, t), 4), metric=metric, served=served, target=w.target,
            replicas=replicas, ready=((dep or {}).get("status") or {}).get("readyReplicas", 0) if dep else None,
            desired=status.get("desiredReplicas"),
            conditions=[{k: c.get(k, "") for k in ("type", "status", "reason", "message")}
                        for c in status.get("conditions") or ()],
            reason=decision_reason(hpa, mine), metric_error=err, truth=self.truth_of(w),
        )
        prev = self.latest.get(w.name)
        if prev is None:  # Events from before the demo explain nothing it will see
            self._used_events.update(_event_key(e) for e in mine)
        if prev is not None and prev.replicas is not None and replicas is not None and replicas != prev.replicas:
            self.changes[w.name].append(ReplicaChange(sample.t, prev.replicas, replicas, ""))
            self._pending[w.name].append((len(self.changes[w.name]) - 1, 0))
        self._explain_changes(w.name, mine, hpa)
        return sample

    def _explain_changes(self, name: str, events: list[dict[str, Any]], hpa: dict[str, Any] | None) -> None:
        """Give each replica change the controller's rescale Event for that size (it may be
        written a moment after the scale); after a few samples without one, the status' word."""
        still = []
        for index, waited in self._pending[name]:
            change = self.changes[name][index]
            match = next((e for e in events if e.get("reason") == "SuccessfulRescale"
                          and f"New size: {change.after}" in (e.get("message") or "")
                          and _event_key(e) not in self._used_events), None)
            if match is not None:
                self._used_events.add(_event_key(match))
                self.changes[name][index] = ReplicaChange(change.t, change.before, change.after,
                                                          match.get("message") or "")
            elif waited >= 3:
                self.changes[name][index] = ReplicaChange(change.t, change.before, change.after,
                                                          decision_reason(hpa, []))
            else:
                still.append((index, waited + 1))
        self._pending[name] = still

    def finish(self) -> None:
        """Settle changes still waiting for an Event with what the status says now."""
        for name in self._pending:
            for index, _ in self._pending[name]:
                c = self.changes[name][index]
                if not c.reason:
                    self.changes[name][index] = ReplicaChange(c.t, c.before, c.after, self.latest[name].reason)
            self._pending[name] = []

    async def sample(self, t: float) -> dict[str, Sample]:
        samples = await asyncio.gather(*(self._one(w, t) for w in self.workloads))
        for w, s in zip(self.workloads, samples, strict=True):
            self.timeline[w.name].append(s)
            self.latest[w.name] = s
        return dict(self.latest)
