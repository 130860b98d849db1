"""The HTTP face: a FastAPI app with Kubernetes aggregated-API paths and wire formats over the providers.

Routes know `custom.metrics.k8s.io` / `external.metrics.k8s.io` and nothing about Prometheus.
Responses are serialized with orjson; every error, including unexpected ones, leaves as a
`metav1.Status`. Percent-encoded path segments (`%2A`) arrive decoded from the ASGI server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

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
# The readiness checks, in order: (name, None when it passes, else why it fails).
Readiness = Callable[[], Awaitable[list[tuple[str, str | None]]]]


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
    on_startup: Callable[[], Awaitable[None]] | None = None,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    resource: ResourceMetricsProvider | None = None,
    hot: ASGIApp | None = None,
) -> FastAPI:
    """The ASGI app; `custom`/`external`/`resource` None disables that API group. `hot`: the
    metrics API groups' paths as served already (adapter.front), else built here."""
    metrics = metrics or SelfMetrics()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if on_startup:
            await on_startup()
        try:
            yield
        finally:
            if on_shutdown:
                await on_shutdown()

    # the aggregator reads /openapi/v2 and /openapi/v3 (adapter.openapi), not FastAPI's own document
    app = _App(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings, app.state.metrics = settings, metrics
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
    @get("/healthz")
    @get("/livez")
    async def healthz(request: Request) -> Response:
        if "verbose" in request.query_params:
            return PlainTextResponse(f"[+]ping ok\n{request.url.path.lstrip('/')} check passed\n")
        return PlainTextResponse("ok")

    withheld = {"last": ""}

    @get("/readyz")
    async def readyz(request: Request) -> Response:
        checks = await readiness() if readiness else [("prometheus", None)]
        failed = [f"{name}: {why}" for name, why in checks if why is not None]
        verbose = "verbose" in request.query_params
        if not failed:
            withheld["last"] = ""
            if not verbose:
                return PlainTextResponse("ok")
            return PlainTextResponse("[+]ping ok\n" + "".join(f"[+]{name} ok\n" for name, _ in checks)
                                     + "readyz check passed\n")
        why = "; ".join(failed)
        if why != withheld["last"]:  # the detail goes to the log (once per new reason)...
            withheld["last"] = why
            log.warning("readyz check failed: %s", why)
        # ...and to callers authorized for /readyz who ask for it (insecure serving: everyone), as
        # Kubernetes' healthz withholds a failed check's reason from the others
        authorized = settings.insecure or request.scope.get("user") is not None
        lines = "".join(f"[+]{name} ok\n" if reason is None else
                        f"[-]{name} failed: {reason if verbose and authorized else 'reason withheld'}\n"
                        for name, reason in checks)
        return PlainTextResponse(f"[+]ping ok\n{lines}readyz check failed\n", status_code=503)

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
