"""The hot paths as raw ASGI: the metric values the HPA polls and the version documents.

`/apis/custom.metrics.k8s.io/{version}[/...]` and `/apis/external.metrics.k8s.io/{version}[/...]`
are answered here without a framework's per-request machinery (FastAPI's dependency solving, exit
stacks and `jsonable_encoder` over every item were ~3x the cost of the work itself at 1,000 pods,
issue 7); every other path goes on to the Starlette app. Same answers and errors as routes would give: orjson
bodies, `metav1.Status` errors with their codes, 405 for other methods.

A serialized answer is kept for exactly as long as the Prometheus answer it was built from may
be served (the query cache's freshness), keyed by the request and, for label selectors, by the
version of the watched objects: many autoscalers polling the same metric cost one dict lookup.
"""

from __future__ import annotations

import logging
import math
import time
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl

import orjson

from adapter.provider import CustomMetricsProvider, CustomValue, ExternalMetricsProvider
from adapter.ttlcache import TTLCache
from promscaler import wire
from promscaler.logs import vlog
from promscaler.quantity import format_quantity
from promscaler.selectors import Selector, SelectorError, parse_selector, to_label_selector
from promscaler.status import BadRequest, MethodNotAllowed, NotFound, StatusError, status_body

if TYPE_CHECKING:
    from adapter.selfmetrics import SelfMetrics

__all__ = ["MetricRoutes", "RequestMetrics", "Route"]

log = logging.getLogger("adapter.app")
_JSON_HEADERS = [(b"content-type", b"application/json")]


class Route:
    """What the request-metrics middleware reads from `scope["route"]`: the path template."""

    def __init__(self, path: str) -> None:
        self.path = path


def timestamp(ts: float) -> str:
    """RFC 3339 seconds, cached by the whole second: every item of one answer shares its sample
    time, and uncached answers of the same second share the second (each evaluates at "now")."""
    return _second(math.floor(ts))


@lru_cache(maxsize=256)
def _second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def _custom_items(version: str, values: list[CustomValue], metric_selector: dict | None) -> list[dict[str, Any]]:
    if not values:
        return []
    first = values[0]  # one request: one metric of one resource, one rule
    res = first.resource
    return wire.custom_metric_values(
        version, res.kind, res.api_version, first.metric,
        [(v.name, v.namespace, format_quantity(v.value), timestamp(v.timestamp)) for v in values],
        first.window_seconds, metric_selector)


def query_selector(query: dict[str, str], name: str) -> Selector:
    """The selector in query parameter `name` (none: everything); a bad one is a 400 naming it."""
    raw = query.get(name)
    try:
        return parse_selector(raw)
    except SelectorError as exc:
        raise BadRequest(f"invalid {name} {raw!r}: {exc}") from None


def _check_segments(parts: list[str]) -> None:
    """Names are UTF-8 text: the server decodes a percent-encoded byte that is not UTF-8 as U+FFFD
    (and Prometheus rejects that rune in a query), so such a segment, or a control character, is a
    bad request rather than a name to look up."""
    for part in parts:
        if "\ufffd" in part or not part.isprintable():
            raise BadRequest(f"invalid name {part!r} in the path: names must be printable UTF-8 text")


def _check_version(version: str, versions: tuple[str, ...], group: str) -> None:
    if version not in versions:
        raise NotFound(f"the server could not find the requested resource: {group}/{version} is not served")


def log_failure(method: str, path: str, query: str, exc: StatusError) -> None:
    """Every failed request at warning with its reason (and the detail kept from the client); a 404
    (an unknown metric: clients probe) only at -v=4."""
    where = f"{method} {path}" + (f"?{query}" if query else "")
    why = f"{exc.message} [{exc.log_detail}]" if exc.log_detail else exc.message
    if exc.code == 404:
        vlog(log, 4, "%s: %d %s: %s", where, exc.code, exc.reason, why)
    else:
        log.warning("%s: %d %s: %s", where, exc.code, exc.reason, why)


def error_answer(scope: Any, exc: Exception) -> tuple[int, bytes]:
    """The code and metav1.Status body of a failed request, logged: a StatusError as it says
    (`log_failure`), anything else a 500 naming only its type (never a traceback to the client)."""
    path: str = scope["path"]
    if isinstance(exc, StatusError):
        log_failure(scope["method"], path, scope["query_string"].decode("latin-1"), exc)
        return exc.code, orjson.dumps(exc.to_status())
    log.error("unexpected error serving %s: %s", path, exc, exc_info=exc)
    return 500, orjson.dumps(status_body(500, "InternalError",
                                         f"internal error serving {path}: {type(exc).__name__}"))


async def send_json(send: Any, code: int, body: bytes, content_type: bytes | None = None) -> None:
    """A whole JSON answer over raw ASGI (the metrics routes bypass FastAPI on the hot path);
    `content_type` for another kind of body (the probes' text)."""
    headers = _JSON_HEADERS if content_type is None else [(b"content-type", content_type)]
    await send({"type": "http.response.start", "status": code,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class MetricRoutes:
    """ASGI middleware answering the two metrics API groups below their group documents."""

    CUSTOM = f"/apis/{wire.CUSTOM_GROUP}/"
    EXTERNAL = f"/apis/{wire.EXTERNAL_GROUP}/"
    _ROUTES: ClassVar[dict[tuple[str, bool], Route]] = {
        (g, values): Route(f"/apis/{g}/{{version}}" + ("/{rest:path}" if values else ""))
        for g in (wire.CUSTOM_GROUP, wire.EXTERNAL_GROUP) for values in (False, True)}

    def __init__(self, app, custom: CustomMetricsProvider | None, external: ExternalMetricsProvider | None,
                 max_answers: int = 1024) -> None:
        self.app, self.custom, self.external = app, custom, external
        self.answers: TTLCache[bytes] = TTLCache(max_answers)

    @classmethod
    def claims(cls, path: str) -> bool:
        """Whether `path` is below a metrics API group document (cheap: the per-request gate)."""
        return (path.startswith(cls.CUSTOM) and len(path) > len(cls.CUSTOM)) or (
            path.startswith(cls.EXTERNAL) and len(path) > len(cls.EXTERNAL))

    async def __call__(self, scope, receive, send) -> None:
        path: str = scope["path"]
        if scope["type"] != "http" or not self.claims(path):
            return await self.app(scope, receive, send)
        if path.startswith(self.CUSTOM):
            group, rest, served = wire.CUSTOM_GROUP, path[len(self.CUSTOM):], self.custom is not None
        else:
            group, rest, served = wire.EXTERNAL_GROUP, path[len(self.EXTERNAL):], self.external is not None
        version, slash, tail = rest.partition("/")
        if not served or not version:
            return await self.app(scope, receive, send)
        scope["route"] = self._ROUTES[group, bool(slash)]
        code = 200
        try:
            if scope["method"] != "GET":
                raise MethodNotAllowed(f"method {scope['method']} is not supported on {path}")
            if not slash:
                body = self._resources(group, version)
            else:
                body = await self._values(group, version, tail, scope["query_string"])
        except Exception as exc:
            code, body = error_answer(scope, exc)
        await send_json(send, code, body)

    def _custom(self) -> CustomMetricsProvider:
        if self.custom is None:  # __call__ hands a group's paths over only while it is served
            raise NotFound(f"{wire.CUSTOM_GROUP} is not served")
        return self.custom

    def _external(self) -> ExternalMetricsProvider:
        if self.external is None:
            raise NotFound(f"{wire.EXTERNAL_GROUP} is not served")
        return self.external

    async def _values(self, group: str, version: str, tail: str, raw_query: bytes) -> bytes:
        """A value list: from the answers kept while fresh, else built (every wait inside is bounded
        by the Prometheus and Kubernetes timeouts, themselves within `--request-timeout`)."""
        query = dict(parse_qsl(raw_query.decode("latin-1"), keep_blank_values=True)) if raw_query else {}
        # a `*` answer depends on which objects exist (and match): reusable while they stay the same
        by_labels = group == wire.CUSTOM_GROUP and (bool(query.get("labelSelector")) or "/*/" in f"/{tail}")
        key = (group, version, tail, raw_query, self._custom().objects_version() if by_labels else 0)
        body = self.answers.get(key)
        if body is None:
            if group == wire.CUSTOM_GROUP:
                body, fresh_until = await self._custom_values(version, tail, query)
            else:
                body, fresh_until = await self._external_values(version, tail, query)
            if fresh_until > 0:
                self.answers.put_until(key, body, fresh_until)
        return body

    # -- version documents ---------------------------------------------------------------------
    def _resources(self, group: str, version: str) -> bytes:
        if group == wire.CUSTOM_GROUP:
            _check_version(version, wire.CUSTOM_VERSIONS, group)
            resources = sorted(
                (wire.api_resource(f"{m.resource.api_name}/{m.metric}", "MetricValueList", m.resource.namespaced)
                 for m in self._custom().list_all_metrics()), key=lambda r: r["name"])
        else:
            _check_version(version, wire.EXTERNAL_VERSIONS, group)
            resources = [wire.api_resource(m, "ExternalMetricValueList", True)
                         for m in sorted(self._external().list_all_external_metrics())]
        return orjson.dumps(wire.api_resource_list(f"{group}/{version}", resources))

    # -- values --------------------------------------------------------------------------------
    async def _custom_values(self, version: str, rest: str, query: dict[str, str]) -> tuple[bytes, float]:
        _check_version(version, wire.CUSTOM_VERSIONS, wire.CUSTOM_GROUP)
        parts = rest.split("/")
        if len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "metrics":
            namespace, resource, name, metric = None, "namespaces", parts[1], parts[3]
        elif len(parts) == 5 and parts[0] == "namespaces":
            namespace, resource, name, metric = parts[1], parts[2], parts[3], parts[4]
        elif len(parts) == 3:
            namespace, resource, name, metric = None, parts[0], parts[1], parts[2]
        else:
            raise BadRequest(f"malformed path /apis/{wire.CUSTOM_GROUP}/{version}/{rest}: expected "
                             "[namespaces/{namespace}/]{resource}/{name|*}/{metric} "
                             "or namespaces/{namespace}/metrics/{metric}")
        if not all(parts):
            raise BadRequest(f"malformed path /apis/{wire.CUSTOM_GROUP}/{version}/{rest}: empty segment")
        _check_segments(parts)
        metric_selector = query_selector(query, "metricLabelSelector")
        echo = to_label_selector(metric_selector)
        if name == "*":
            selector = query_selector(query, "labelSelector")
            values = await self._custom().get_metric_by_selector(resource, namespace, selector, metric, metric_selector)
        else:
            values = [await self._custom().get_metric_by_name(resource, namespace, name, metric, metric_selector)]
        body = orjson.dumps(wire.metric_value_list(version, _custom_items(version, values, echo)))
        return body, min((v.fresh_until for v in values), default=0.0)

    async def _external_values(self, version: str, rest: str, query: dict[str, str]) -> tuple[bytes, float]:
        _check_version(version, wire.EXTERNAL_VERSIONS, wire.EXTERNAL_GROUP)
        parts = rest.split("/")
        if len(parts) != 3 or parts[0] != "namespaces" or not all(parts):
            raise BadRequest(f"malformed path /apis/{wire.EXTERNAL_GROUP}/{version}/{rest}: expected "
                             "namespaces/{namespace}/{metric}")
        _check_segments(parts)
        selector = query_selector(query, "labelSelector")
        values = await self._external().get_external_metric(parts[1], parts[2], selector)
        body = orjson.dumps(wire.external_metric_value_list(
            wire.external_metric_value(v.metric, v.labels, format_quantity(v.value), timestamp(v.timestamp),
                                       v.window_seconds) for v in values))
        return body, min((v.fresh_until for v in values), default=0.0)


class RequestMetrics:
    """Pure ASGI middleware: counts and times requests by route template and status code."""

    def __init__(self, app: Any, metrics: SelfMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, code = time.perf_counter(), 500

        async def send_wrapper(message: Any) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "other"
            self.metrics.request(path, code, time.perf_counter() - started)
