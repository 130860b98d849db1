"""The HTTP face: Kubernetes aggregated-API paths and wire formats over the two providers.

Routes know `custom.metrics.k8s.io` / `external.metrics.k8s.io` and nothing about Prometheus.
Responses are serialized with orjson; every error, including unexpected ones, leaves as a
`metav1.Status`. Percent-encoded path segments (`%2A`) arrive decoded from the ASGI server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import PlainTextResponse, Response

from adapter.openapi import openapi_v2, openapi_v3_document, openapi_v3_index
from adapter.provider import CustomMetricsProvider, CustomValue, ExternalMetricsProvider
from adapter.selfmetrics import CONTENT_TYPE_LATEST, SelfMetrics
from adapter.settings import Settings
from promscaler import wire
from promscaler.quantity import format_quantity
from promscaler.selectors import Operator, Selector, SelectorError, parse_selector
from promscaler.status import BadRequest, MethodNotAllowed, NotFound, ServiceUnavailable, StatusError, status_body

__all__ = ["create_app", "JSONBytes"]

log = logging.getLogger("adapter.app")
Readiness = Callable[[], Awaitable[tuple[bool, str]]]


class JSONBytes(Response):
    """orjson-serialized JSON (the hot path)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _status_response(exc: StatusError) -> JSONBytes:
    return JSONBytes(exc.to_status(), status_code=exc.code)


def _selector(request: Request, name: str) -> Selector:
    raw = request.query_params.get(name)
    try:
        return parse_selector(raw)
    except SelectorError as exc:
        raise BadRequest(f"invalid {name} {raw!r}: {exc}") from None


def _label_selector_obj(sel: Selector) -> dict[str, Any] | None:
    """A parsed selector as `metav1.LabelSelector` (echoed in v1beta2 `metric.selector`)."""
    if sel.empty():
        return None
    match_labels, exprs = {}, []
    names = {Operator.IN: "In", Operator.NOT_IN: "NotIn", Operator.EXISTS: "Exists", Operator.DOES_NOT_EXIST: "DoesNotExist"}
    for r in sel.requirements:
        if r.operator is Operator.EQUALS:
            match_labels[r.key] = r.values[0]
        elif r.operator is Operator.NOT_EQUALS:
            exprs.append({"key": r.key, "operator": "NotIn", "values": list(r.values)})
        elif r.operator in names:
            exprs.append({"key": r.key, "operator": names[r.operator], **({"values": list(r.values)} if r.values else {})})
    out: dict[str, Any] = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if exprs:
        out["matchExpressions"] = exprs
    return out


def _timestamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _custom_item(version: str, v: CustomValue, metric_selector: dict | None) -> dict[str, Any]:
    described = wire.object_reference(v.resource.kind, v.name, v.namespace, v.resource.api_version)
    return wire.custom_metric_value(version, described, v.metric, format_quantity(v.value), _timestamp(v.timestamp),
                                    v.window_seconds, metric_selector)


class _RequestMetrics:
    """Pure ASGI middleware: counts and times requests by route template and status code."""

    def __init__(self, app, metrics: SelfMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, code = time.perf_counter(), 500

        async def send_wrapper(message):
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


def create_app(
    settings: Settings,
    custom: CustomMetricsProvider | None,
    external: ExternalMetricsProvider | None,
    readiness: Readiness | None = None,
    metrics: SelfMetrics | None = None,
    on_startup: Callable[[], Awaitable[None]] | None = None,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
) -> FastAPI:
    """The ASGI app; `custom`/`external` None disables that API group."""
    metrics = metrics or SelfMetrics()

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        if on_startup:
            await on_startup()
        try:
            yield
        finally:
            if on_shutdown:
                await on_shutdown()

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan, default_response_class=JSONBytes)
    app.state.settings, app.state.metrics = settings, metrics
    deadline = settings.request_timeout

    async def within_deadline(coro):
        try:
            return await asyncio.wait_for(coro, timeout=deadline)
        except asyncio.TimeoutError:
            raise ServiceUnavailable(f"the request did not complete within {deadline:g}s") from None

    # -- errors --------------------------------------------------------------------------------
    @app.exception_handler(StatusError)
    async def _status(_req: Request, exc: StatusError):
        return _status_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError):
        return _status_response(BadRequest(f"invalid request: {exc.errors()[0].get('msg', 'bad parameters')}"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(req: Request, exc: StarletteHTTPException):
        if exc.status_code == 405:
            return _status_response(MethodNotAllowed(f"method {req.method} is not supported on {req.url.path}"))
        if exc.status_code == 404:
            return _status_response(NotFound(f"the server could not find the requested resource {req.url.path}"))
        return JSONBytes(status_body(exc.status_code, "BadRequest" if exc.status_code < 500 else "InternalError",
                                     str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(req: Request, exc: Exception):
        log.error("unexpected error serving %s: %s", req.url.path, exc, exc_info=exc)
        return JSONBytes(status_body(500, "InternalError", f"internal error serving {req.url.path}: "
                                     f"{type(exc).__name__}"), status_code=500)

    # -- health and self ------------------------------------------------------------------------
    @app.get("/healthz")
    @app.get("/livez")
    async def healthz():
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz():
        ok, why = await readiness() if readiness else (True, "")
        if ok:
            return PlainTextResponse("ok")
        return PlainTextResponse(f"[-]{why}\nreadyz check failed\n", status_code=503)

    @app.get("/metrics")
    async def self_metrics():
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/openapi/v2")
    async def openapi2():
        return openapi_v2(custom is not None, external is not None)

    @app.get("/openapi/v3")
    async def openapi3():
        return openapi_v3_index(custom is not None, external is not None)

    @app.get("/openapi/v3/apis/{group}/{version}")
    async def openapi3_doc(group: str, version: str):
        if (group == wire.CUSTOM_GROUP and custom and version in wire.CUSTOM_VERSIONS) or (
                group == wire.EXTERNAL_GROUP and external and version in wire.EXTERNAL_VERSIONS):
            return openapi_v3_document(group, version)
        raise NotFound(f"no OpenAPI document for {group}/{version}")

    # -- discovery -----------------------------------------------------------------------------
    groups = []
    if custom is not None:
        groups.append(wire.api_group(wire.CUSTOM_GROUP, wire.CUSTOM_VERSIONS))
    if external is not None:
        groups.append(wire.api_group(wire.EXTERNAL_GROUP, wire.EXTERNAL_VERSIONS))

    @app.get("/apis")
    async def apis():
        # Never the aggregated-discovery type, whatever Accept says: clients then fall back to these documents.
        return wire.api_group_list(groups)

    if custom is not None:
        @app.get(f"/apis/{wire.CUSTOM_GROUP}")
        async def custom_group():
            return groups[0]

        @app.get(f"/apis/{wire.CUSTOM_GROUP}/{{version}}")
        async def custom_resources(version: str):
            _check_version(version, wire.CUSTOM_VERSIONS, wire.CUSTOM_GROUP)
            resources = sorted(
                (wire.api_resource(f"{m.resource.api_name}/{m.metric}", "MetricValueList", m.resource.namespaced)
                 for m in custom.list_all_metrics()), key=lambda r: r["name"])
            return wire.api_resource_list(f"{wire.CUSTOM_GROUP}/{version}", resources)

        @app.get(f"/apis/{wire.CUSTOM_GROUP}/{{version}}/{{rest:path}}")
        async def custom_values(version: str, rest: str, request: Request):
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
                                 "[namespaces/{namespace}/]{resource}/{name|*}/{metric} or namespaces/{namespace}/metrics/{metric}")
            if not all(parts):
                raise BadRequest(f"malformed path /apis/{wire.CUSTOM_GROUP}/{version}/{rest}: empty segment")
            metric_selector = _selector(request, "metricLabelSelector")
            echo = _label_selector_obj(metric_selector)
            if name == "*":
                selector = _selector(request, "labelSelector")
                values = await within_deadline(
                    custom.get_metric_by_selector(resource, namespace, selector, metric, metric_selector))
            else:
                values = [await within_deadline(
                    custom.get_metric_by_name(resource, namespace, name, metric, metric_selector))]
            return wire.metric_value_list(version, [_custom_item(version, v, echo) for v in values])

    if external is not None:
        @app.get(f"/apis/{wire.EXTERNAL_GROUP}")
        async def external_group():
            return groups[-1]

        @app.get(f"/apis/{wire.EXTERNAL_GROUP}/{{version}}")
        async def external_resources(version: str):
            _check_version(version, wire.EXTERNAL_VERSIONS, wire.EXTERNAL_GROUP)
            resources = [wire.api_resource(m, "ExternalMetricValueList", True)
                         for m in sorted(external.list_all_external_metrics())]
            return wire.api_resource_list(f"{wire.EXTERNAL_GROUP}/{version}", resources)

        @app.get(f"/apis/{wire.EXTERNAL_GROUP}/{{version}}/{{rest:path}}")
        async def external_values(version: str, rest: str, request: Request):
            _check_version(version, wire.EXTERNAL_VERSIONS, wire.EXTERNAL_GROUP)
            parts = rest.split("/")
            if len(parts) != 3 or parts[0] != "namespaces" or not all(parts):
                raise BadRequest(f"malformed path /apis/{wire.EXTERNAL_GROUP}/{version}/{rest}: expected "
                                 "namespaces/{namespace}/{metric}")
            selector = _selector(request, "labelSelector")
            values = await within_deadline(external.get_external_metric(parts[1], parts[2], selector))
            return wire.external_metric_value_list(
                wire.external_metric_value(v.metric, v.labels, format_quantity(v.value), _timestamp(v.timestamp),
                                           v.window_seconds) for v in values)

    app.add_middleware(_RequestMetrics, metrics=metrics)
    return app


def _check_version(version: str, versions: tuple[str, ...], group: str) -> None:
    if version not in versions:
        raise NotFound(f"the server could not find the requested resource: {group}/{version} is not served")
