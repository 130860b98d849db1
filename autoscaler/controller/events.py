"""Kubernetes Events about autoscalers, aggregated like client-go's recorder.

A repeated (object, type, reason, message) bumps `count` and `lastTimestamp` on the existing
Event instead of creating a new one, so a metric failing every 15 s is one Event, not hundreds.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import datetime
from typing import Any

from promscaler.kubeapi import ApiError, Kube, Obj
from promscaler.times import format_time

from .apihealth import is_outage

log = logging.getLogger(__name__)

COMPONENT = "promscaler-autoscaler"


class EventRecorder:
    def __init__(self, kube: Kube, host: str | None = None) -> None:
        self.kube = kube
        self.host = host or os.uname().nodename
        self._seen: dict[tuple[str, str, str, str, str, str], tuple[str, int]] = {}  # -> (event name, count)

    async def record(self, obj: Obj, type_: str, reason: str, message: str, now: datetime) -> None:
        """Create or bump an Event; failures are logged, never raised (events are best effort)."""
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        key = (ns, obj.get("kind", ""), name, type_, reason, message)
        stamp = format_time(now)
        try:
            seen = self._seen.get(key)
            if seen is not None:
                event_name, count = seen
                patch = {"count": count + 1, "lastTimestamp": stamp}
                try:
                    await self.kube.request("PATCH", f"/api/v1/namespaces/{ns}/events/{event_name}", body=patch,
                                            content_type="application/merge-patch+json")
                    self._seen[key] = (event_name, count + 1)
                    return
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            event_name = f"{name}.{uuid.uuid4().hex[:16]}"
            await self.kube.request(
                "POST",
                f"/api/v1/namespaces/{ns}/events",
                body=_event(obj, event_name, type_, reason, message, stamp, self.host),
            )
            self._seen[key] = (event_name, 1)
            if len(self._seen) > 10_000:
                self._seen.pop(next(iter(self._seen)))
        except Exception as exc:
            (log.debug if is_outage(exc) else log.warning)(
                "could not record event %s on %s %s/%s: %s", reason, obj.get("kind", ""), ns, name, exc)


def _event(obj: Obj, event_name: str, type_: str, reason: str, message: str, stamp: str, host: str) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": event_name, "namespace": meta.get("namespace", "default")},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": COMPONENT, "host": host},
        "reportingComponent": COMPONENT,
        "reportingInstance": host,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
