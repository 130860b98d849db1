"""`metrics.k8s.io` v1 and v1beta1 as raw ASGI, in metrics-server's wire format: what `kubectl top`
and the HPA's Resource / ContainerResource metrics read. The two versions are the same API
(Kubernetes 1.37 promoted v1beta1 unchanged): one answer, its `apiVersion` naming the version asked.

    /apis/metrics.k8s.io                              APIGroup (v1 preferred)
    /apis/metrics.k8s.io/{v}                          APIResourceList (pods, nodes)
    /apis/metrics.k8s.io/{v}/pods                     PodMetricsList, every namespace
    /apis/metrics.k8s.io/{v}/namespaces/{ns}/pods     PodMetricsList
    /apis/metrics.k8s.io/{v}/namespaces/{ns}/pods/{n} PodMetrics
    /apis/metrics.k8s.io/{v}/nodes[/{n}]              NodeMetricsList / NodeMetrics

Lists take `labelSelector` and `fieldSelector` (metadata.name, metadata.namespace). Serialized
answers are kept while their Prometheus answers are fresh, keyed by the request and the version
of the cached pods and nodes, as adapter.metricroutes does for custom metrics.
"""

from __future__ import annotations

import time
from typing import ClassVar
from urllib.parse import parse_qsl

import orjson

from adapter.metricroutes import Route, error_answer, query_selector, send_json, timestamp
from adapter.resourcemetrics import ResourceMetricsProvider
from adapter.ttlcache import TTLCache
from promscaler import wire
from promscaler.quantity import format_milli
from promscaler.selectors import Selector
from promscaler.status import MethodNotAllowed, NotFound
from promscaler.times import go_duration

__all__ = ["ResourceRoutes"]

_GROUP = f"/apis/{wire.RESOURCE_GROUP}"


def _cpu(milli: int) -> str:
    """format_milli's DecimalSI spelling, with the usual case (not whole cores) inline: 5,000 pods."""
    return f"{milli}m" if milli % 1000 else format_milli(milli)


def _memory(milli: int) -> str:
    """format_milli's BinarySI spelling, with the usual case (whole bytes, not a multiple of 1024,
    or below 1024) inline."""
    if not milli % 1000:
        whole = milli // 1000
        if whole >= 0 and (whole & 1023 or whole < 1024):
            return str(whole)
    return format_milli(milli, binary=True)


def _not_found(path: str) -> NotFound:
    return NotFound(f"the server could not find the requested resource {path}")


class ResourceRoutes:
    """ASGI middleware answering `/apis/metrics.k8s.io[/...]`; other paths go on to `app`."""

    _ROUTES: ClassVar[dict[str, Route]] = {k: Route(p) for k, p in (
        ("group", _GROUP), ("version", _GROUP + "/{version}"), ("pods", _GROUP + "/{version}/pods"),
        ("nspods", _GROUP + "/{version}/namespaces/{namespace}/pods"),
        ("pod", _GROUP + "/{version}/namespaces/{namespace}/pods/{name}"),
        ("nodes", _GROUP + "/{version}/nodes"), ("node", _GROUP + "/{version}/nodes/{name}"))}

    def __init__(self, app, provider: ResourceMetricsProvider, max_answers: int = 256) -> None:
        self.app, self.provider = app, provider
        self.answers: TTLCache[bytes] = TTLCache(max_answers)

    @staticmethod
    def claims(path: str) -> bool:
        return path == _GROUP or path.startswith(_GROUP + "/")

    async def __call__(self, scope, receive, send) -> None:
        path: str = scope["path"]
        if scope["type"] != "http" or not self.claims(path):
            return await self.app(scope, receive, send)
        code = 200
        try:
            body = await self._answer(scope, path)
        except Exception as exc:
            code, body = error_answer(scope, exc)
        await send_json(send, code, body)

    async def _answer(self, scope, path: str) -> bytes:
        parts = path[len(_GROUP):].strip("/").split("/") if path != _GROUP else []
        if scope["method"] != "GET":
            scope["route"] = self._ROUTES["group"]
            raise MethodNotAllowed(f"method {scope['method']} is not supported on {path}: metrics.k8s.io is read-only")
        if not parts:
            scope["route"] = self._ROUTES["group"]
            return orjson.dumps(wire.api_group(wire.RESOURCE_GROUP, wire.RESOURCE_VERSIONS))
        if parts[0] not in wire.RESOURCE_VERSIONS or not all(parts):
            raise _not_found(path)
        rest = parts[1:]
        if not rest:
            scope["route"] = self._ROUTES["version"]
            return orjson.dumps(wire.api_resource_list(f"{wire.RESOURCE_GROUP}/{parts[0]}", [
                wire.api_resource("nodes", "NodeMetrics", False, ("get", "list")),
                wire.api_resource("pods", "PodMetrics", True, ("get", "list"))]))
        if rest == ["pods"]:
            route, kind, namespace, name = "pods", "pods", None, None
        elif len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == "pods":
            route, kind, namespace, name = ("nspods" if len(rest) == 3 else "pod"), "pods", rest[1], (
                rest[3] if len(rest) == 4 else None)
        elif rest[0] == "nodes" and len(rest) <= 2:
            route, kind, namespace, name = ("nodes" if len(rest) == 1 else "node"), "nodes", None, (
                rest[1] if len(rest) == 2 else None)
        else:
            raise _not_found(path)
        scope["route"] = self._ROUTES[route]
        raw_query: bytes = scope["query_string"]
        key = (path, raw_query, await self.provider.versions(), self.provider.generation)
        body = self.answers.get(key)
        if body is None:
            query = dict(parse_qsl(raw_query.decode("latin-1"), keep_blank_values=True))
            labels, fields = query_selector(query, "labelSelector"), query_selector(query, "fieldSelector")
            if kind == "pods":
                body, fresh_until = await self._pods(parts[0], namespace, name, labels, fields)
            else:
                body, fresh_until = await self._nodes(parts[0], name, labels, fields)
            if fresh_until > time.monotonic():
                self.answers.put_until(key, body, fresh_until)
        return body

    async def _pods(self, version: str, namespace: str | None, name: str | None, labels: Selector,
                    fields: Selector) -> tuple[bytes, float]:
        usages, fresh_until = await self.provider.pods(namespace, name, labels, fields)
        created, window = timestamp(time.time()), go_duration(self.provider.rules.window_seconds)
        items = [wire.pod_metrics(u.name, u.namespace, timestamp(u.timestamp), window,
                                  {c: {"cpu": _cpu(cpu), "memory": _memory(mem)}
                                   for c, cpu, mem in u.containers}, u.labels, created, version) for u in usages]
        if name is not None:
            return orjson.dumps(items[0]), fresh_until
        return orjson.dumps(wire.pod_metrics_list(items, version)), fresh_until

    async def _nodes(self, version: str, name: str | None, labels: Selector, fields: Selector
                     ) -> tuple[bytes, float]:
        usages, fresh_until = await self.provider.nodes(name, labels, fields)
        created, window = timestamp(time.time()), go_duration(self.provider.rules.window_seconds)
        items = [wire.node_metrics(u.name, timestamp(u.timestamp), window, {
            "cpu": _cpu(u.cpu_milli), "memory": _memory(u.memory_milli)}, u.labels, created, version)
            for u in usages]
        if name is not None:
            return orjson.dumps(items[0]), fresh_until
        return orjson.dumps(wire.node_metrics_list(items, version)), fresh_until
