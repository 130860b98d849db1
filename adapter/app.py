"""The HTTP face: a FastAPI app with Kubernetes aggregated-API paths and wire formats over the providers.

Routes know `custom.metrics.k8s.io` / `external.metrics.k8s.io` and nothing about Prometheus.
Responses are serialized with orjson; every error, including unexpected ones, leaves as a
`metav1.Status`. Percent-encoded path segments (`%2A`) arrive decoded from the ASGI server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.health import Health, Readiness
from adapter.metricroutes import MetricRoutes, RequestMetrics, log_failure
from adapter.openapi import group_versions, openapi_v2, openapi_v3_document, openapi_v3_index
from adapter.provider import CustomMetricsProvider, ExternalMetricsProvider
from adapter.selfmetrics import CONTENT_TYPE_LATEST, SelfMetrics
from adapter.settings import Settings
from promscaler import wire
from promscaler.status import MethodNotAllowed, NotFound, StatusError, status_body

if TYPE_CHECKING:  # imported when metrics.k8s.io is served (it needs the watch caches, hence the kubernetes client)
    from adapter.resourcemetrics import ResourceMetricsProvider

__all__ = ["JSONBytes", "Readiness", "create_app"]

log = logging.getLogger("adapter.app")


class JSONBytes(Response):
    """orjson-serialized JSON."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _status_response(exc: StatusError) -> JSONBytes:
    return JSONBytes(exc.to_status(), status_code=exc.code)


class _App(FastAPI):
    """FastAPI, except that the metrics API groups' hot paths (adapter.metricroutes,
    adapter.resourceroutes: raw ASGI, measured) are answered ahead of its per-request machinery."""

    hot: ASGIApp | None = None
    resource: ASGIApp | None = None  # metrics.k8s.io (adapter.resourceroutes), when resourceRules are served
    claims_resource: Callable[[str], bool] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            if self.hot is not None and MetricRoutes.claims(path):
                return await self.hot(scope, receive, send)
            if self.resource is not None and self.claims_resource is not None and self.claims_resource(path):
                return await self.resource(scope, receive, send)
        await super().__call__(scope, receive, send)

    async def fallback(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)


def create_app(
    settings: Settings,
    custom: CustomMetricsProvider | None = None,
    external: ExternalMetricsProvider | None = None,
    readiness: Readiness | None = None,
    metrics: SelfMetrics | None = None,
    resource: ResourceMetricsProvider | None = None,
    hot: ASGIApp | None = None,
    health: Health | None = None,
) -> FastAPI:
    """The ASGI app; `custom`/`external`/`resource` None disables that API group. `hot` and
    `health`: the metrics API groups' paths and the probes as served already (adapter.front),
    else built here (`health` from `readiness`)."""
    metrics = metrics or SelfMetrics()

    # the aggregator reads /openapi/v2 and /openapi/v3 (adapter.openapi), not FastAPI's own
    # document; the lifespan (discovery's loops) is adapter.front's
    app = _App(docs_url=None, redoc_url=None, openapi_url=None)
    get = app.get

    # -- errors --------------------------------------------------------------------------------
    async def _status(req: Request, exc: Exception) -> Response:
        assert isinstance(exc, StatusError)
        log_failure(req.method, req.url.path, req.url.query, exc)
        return _status_response(exc)

    async def _http(req: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:
            return _status_response(MethodNotAllowed(f"method {req.method} is not supported on {req.url.path}"))
        if exc.status_code == 404:
            return _status_response(NotFound(f"the server could not find the requested resource {req.url.path}"))
        return JSONBytes(status_body(exc.status_code, "BadRequest" if exc.status_code < 500 else "InternalError",
                                     str(exc.detail)), status_code=exc.status_code)

    async def _unexpected(req: Request, exc: Exception) -> Response:
        log.error("unexpected error serving %s: %s", req.url.path, exc, exc_info=exc)
        return JSONBytes(status_body(500, "InternalError", f"internal error serving {req.url.path}: "
                                     f"{type(exc).__name__}"), status_code=500)

    app.add_exception_handler(StatusError, _status)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)

    # -- health and self ------------------------------------------------------------------------
    # raw ASGI (adapter.health), routed here too for the front's requests that reach the app
    # (a trailing slash: the router's redirect), and for an app served without the front
    probes = health if health is not None else Health(readiness, settings.insecure)
    for path in Health.PATHS:
        app.router.routes.append(Route(path, probes))

    @get("/metrics")
    async def self_metrics() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    served = group_versions(custom is not None, external is not None, resource is not None)
    documents: dict[tuple[str, ...], bytes] = {}  # fixed for the app's life: built on first request, off start-up

    def document(key: tuple[str, ...], build: Callable[[], Any]) -> Response:
        body = documents.get(key)
        if body is None:
            body = documents[key] = orjson.dumps(build())
        return Response(body, media_type="application/json")

    @get("/openapi/v2")
    async def openapi2() -> Response:
        return document(("v2",), lambda: openapi_v2(served))

    @get("/openapi/v3")
    async def openapi3() -> Response:
        return document(("v3",), lambda: openapi_v3_index(served))

    @get("/openapi/v3/apis/{group}/{version}")
    async def openapi3_doc(request: Request) -> Response:
        # Read from the request, not as typed parameters: a parameter FastAPI models makes it import
        # pydantic.v1 (a compatibility check) while the app is built, ~50 ms of every start-up.
        group, version = request.path_params["group"], request.path_params["version"]
        if (group, version) in served:
            return document(("v3", group, version), lambda: openapi_v3_document(group, version))
        raise NotFound(f"no OpenAPI document for {group}/{version}")

    # -- discovery -----------------------------------------------------------------------------
    groups = []
    if custom is not None:
        groups.append(wire.api_group(wire.CUSTOM_GROUP, wire.CUSTOM_VERSIONS))
    if external is not None:
        groups.append(wire.api_group(wire.EXTERNAL_GROUP, wire.EXTERNAL_VERSIONS))
    if resource is not None:
        groups.append(wire.api_group(wire.RESOURCE_GROUP, wire.RESOURCE_VERSIONS))  # answered by ResourceRoutes

    @get("/apis")
    async def apis() -> Response:
        # Never the aggregated-discovery type, whatever Accept says: clients then fall back to these documents.
        return JSONBytes(wire.api_group_list(groups))

    if custom is not None:
        @get(f"/apis/{wire.CUSTOM_GROUP}")
        async def custom_group() -> Response:
            return JSONBytes(groups[0])

    if external is not None:
        external_doc = groups[1 if custom is not None else 0]

        @get(f"/apis/{wire.EXTERNAL_GROUP}")
        async def external_group() -> Response:
            return JSONBytes(external_doc)

    app.add_middleware(RequestMetrics, metrics=metrics)
    # below the group documents: raw ASGI (adapter.metricroutes), ahead of FastAPI's middleware stack
    app.hot = hot if hot is not None else RequestMetrics(MetricRoutes(app.fallback, custom, external), metrics)
    if resource is not None:
        from adapter.resourceroutes import ResourceRoutes  # only with metrics.k8s.io served

        app.resource = RequestMetrics(ResourceRoutes(app.fallback, resource), metrics)
        app.claims_resource = ResourceRoutes.claims
    return app
