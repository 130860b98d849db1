"""HTTP routes of the sandbox API server: discovery, the generic resource handler (list, watch,
CRUD, status and scale subresources) over the resource table, the review APIs, metrics.k8s.io,
and the aggregation proxy. Errors leave as `metav1.Status`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import orjson
import yaml
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from kubesim import discovery
from kubesim.cluster import scale_of
from kubesim.fields import Filter
from kubesim.protobuf import decode_object
from kubesim.resources import ResourceType
from kubesim.views import openapi_document, openapi_index, table, version_info
from promscaler import wire
from promscaler.apidiscovery import AGGREGATED_TYPE
from promscaler.selectors import SelectorError
from promscaler.status import BadRequest, Gone, InternalError, MethodNotAllowed, NotFound, StatusError, Unauthorized
from promscaler.times import micro_time

if TYPE_CHECKING:
    from kubesim.apiserver import KubeSim

__all__ = ["create_app"]

Obj = dict[str, Any]


def js(obj: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def status_response(exc: StatusError) -> Response:
    return js(exc.to_status(), exc.code)


def _success(t: ResourceType, obj: Obj) -> Obj:
    meta = obj["metadata"]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": meta["name"], "group": t.group, "kind": t.plural, "uid": meta.get("uid")}}


def _as(t: ResourceType, obj: Obj) -> Obj:
    """The object as served under the requested version (no conversion: same fields)."""
    return obj if obj.get("apiVersion") == t.api_version else {**obj, "apiVersion": t.api_version}


async def _body(request: Request) -> Any:
    raw = await request.body()
    ctype = request.headers.get("content-type", "application/json")
    if "protobuf" in ctype:
        return decode_object(raw)
    try:
        if "yaml" in ctype:
            return yaml.safe_load(raw)
        return orjson.loads(raw) if raw else None
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise BadRequest(f"request body is not valid {'YAML' if 'yaml' in ctype else 'JSON'}: {exc}") from None


def _int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"{name}: invalid value {value!r}: must be an integer") from None


def _wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


AUDIT_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class _RequestLog:
    """ASGI middleware: (method, path) of each request, in arrival order."""

    def __init__(self, app: Any, log: list[tuple[str, str]]) -> None:
        self.app, self.log = app, log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.log.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


# --- the app -----------------------------------------------------------------------------------

def create_app(sim: KubeSim) -> FastAPI:
    cluster, policy, aggregator = sim.cluster, sim.policy, sim.aggregator

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        cluster.store.close_watchers()
        await aggregator.aclose()

    app = FastAPI(lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    if sim.requests is not None:
        app.add_middleware(_RequestLog, log=sim.requests)

    @app.exception_handler(StatusError)
    async def on_status(request: Request, exc: StatusError) -> Response:
        return status_response(exc)

    @app.exception_handler(SelectorError)
    async def on_selector(request: Request, exc: SelectorError) -> Response:
        return status_response(BadRequest(str(exc)))

    @app.exception_handler(Exception)
    async def on_error(request: Request, exc: Exception) -> Response:
        return status_response(InternalError(f"kubesim: {type(exc).__name__}: {exc}"))

    def caller(request: Request) -> Obj | None:
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        user = policy.user_of(token)
        if sim.authenticate and user is None:
            raise Unauthorized("Unauthorized")
        request.state.user = user
        return user

    @app.get("/version")
    async def version() -> Response:
        return js(version_info(sim.kube_version))

    @app.get("/healthz")
    @app.get("/livez")
    @app.get("/readyz")
    async def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    @app.get("/openapi/v3")
    async def openapi_root(request: Request) -> Response:
        caller(request)
        return js(openapi_index(cluster.registry, sim.resource_version))

    @app.get("/openapi/v3/{path:path}")
    async def openapi_group_version(request: Request, path: str) -> Response:
        caller(request)
        return js(openapi_document(cluster.registry, path, sim.kube_version))

    def aggregated(request: Request) -> bool:
        return sim.aggregated_discovery and discovery.wants_aggregated(request.headers.get("accept"))

    def aggregated_response(groups: dict[str, list[Obj]]) -> Response:
        """APIGroupDiscoveryList of group -> its APIVersionDiscovery entries, preferred first."""
        doc = discovery.group_discovery_list(discovery.group_discovery(g, vs) for g, vs in groups.items())
        return Response(orjson.dumps(doc), media_type=AGGREGATED_TYPE, headers={"Vary": "Accept"})

    def local_versions(group: str, versions: list[str]) -> list[Obj]:
        return [discovery.version_discovery(group, v, (r for t in cluster.registry.in_group_version(group, v)
                                             for r in t.discovery())) for v in versions]

    @app.get("/api")
    async def api_versions(request: Request) -> Response:
        caller(request)
        if aggregated(request):
            return aggregated_response({"": local_versions("", ["v1"])})
        return js({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.url.netloc}]})

    def group_versions() -> dict[str, list[str]]:
        groups = {g: v for g, v in cluster.registry.groups().items() if g}
        for b in aggregator.backends.values():
            groups[b.group] = list(b.versions)
        return groups

    @app.get("/apis")
    async def api_groups(request: Request) -> Response:
        caller(request)
        groups = group_versions()
        if not aggregated(request):
            return js(wire.api_group_list(wire.api_group(g, vs) for g, vs in groups.items()))
        backends = list(aggregator.backends.values())
        remote = dict(zip((b.group for b in backends),
                          await asyncio.gather(*(aggregator.discovery(b) for b in backends)), strict=True))
        return aggregated_response({g: remote[g] if g in remote else local_versions(g, vs) for g, vs in groups.items()})

    @app.get("/apis/{group}")
    async def api_group(request: Request, group: str) -> Response:
        caller(request)
        versions = group_versions().get(group)
        if not versions:
            raise NotFound("the server could not find the requested resource")
        return js(wire.api_group(group, versions))

    def resource_list(group: str, version: str) -> Response:
        rows = cluster.registry.in_group_version(group, version)
        if not rows:
            raise NotFound("the server could not find the requested resource")
        gv = f"{group}/{version}" if group else version
        return js(wire.api_resource_list(gv, [r for t in rows for r in t.discovery()]))

    @app.api_route("/api/v1", methods=["GET"])
    async def core_resources(request: Request) -> Response:
        caller(request)
        return resource_list("", "v1")

    @app.api_route("/api/v1/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def core(request: Request, rest: str) -> Response:
        caller(request)
        return await handle(request, "", "v1", rest)

    @app.api_route("/apis/{group}/{version}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def group_resources(request: Request, group: str, version: str) -> Response:
        user = caller(request)
        if aggregator.routes(group, version):
            return await aggregator.proxy(request, group, user)
        return resource_list(group, version)

    @app.api_route("/apis/{group}/{version}/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def grouped(request: Request, group: str, version: str, rest: str) -> Response:
        user = caller(request)
        if aggregator.routes(group, version):
            return await aggregator.proxy(request, group, user)
        return await handle(request, group, version, rest)

    # --- the generic handler -------------------------------------------------------------

    def resolve(group: str, version: str, rest: str) -> tuple[ResourceType, str | None, str | None, str | None]:
        parts = [p for p in rest.split("/") if p]
        ns = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            t = cluster.registry.lookup(group, version, parts[2])
            if t is not None and t.namespaced:
                ns, parts = parts[1], parts[2:]
        if not parts or len(parts) > 3:
            raise NotFound("the server could not find the requested resource")
        t = cluster.registry.lookup(group, version, parts[0])
        if t is None or (ns is not None and not t.namespaced) or (ns is None and t.namespaced and len(parts) > 1):
            raise NotFound("the server could not find the requested resource")
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        if sub is not None and not ((sub == "status" and t.status) or (sub == "scale" and t.scale)):
            raise NotFound("the server could not find the requested resource")
        return t, ns, name, sub

    async def handle(request: Request, group: str, version: str, rest: str) -> Response:
        """`serve`, and with `sim.audit` on, an audit.k8s.io/v1 Event (level Request) per write."""
        if sim.audit is None or request.method == "GET":
            return await serve(request, group, version, rest)
        received = micro_time()
        try:
            response = await serve(request, group, version, rest)
        except StatusError as exc:
            sim.audit.append(await audit_event(request, group, version, rest, exc.code, received))
            raise
        sim.audit.append(await audit_event(request, group, version, rest, response.status_code, received))
        return response

    async def audit_event(request: Request, group: str, version: str, rest: str, code: int, received: str) -> Obj:
        """What kube-apiserver's audit log records at level Request (the object name of a create
        comes from its body, as the apiserver fills it in)."""
        parts = [p for p in rest.split("/") if p]
        ns = parts[1] if len(parts) >= 3 and parts[0] == "namespaces" else None
        parts = parts[2:] if ns is not None else parts
        try:
            body = await _body(request) if request.headers.get("content-length") not in (None, "0") else None
        except StatusError:
            body = None
        name = parts[1] if len(parts) > 1 else ((body or {}).get("metadata") or {}).get("name")
        user = getattr(request.state, "user", None) or {}
        ref = {"resource": parts[0] if parts else "", "namespace": ns, "name": name, "apiGroup": group,
               "apiVersion": version, "subresource": parts[2] if len(parts) > 2 else None}
        return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request", "stage": "ResponseComplete",
                "requestURI": str(request.url.path), "verb": AUDIT_VERBS.get(request.method, request.method.lower()),
                "user": {"username": user.get("username"), "groups": user.get("groups") or []},
                "userAgent": request.headers.get("user-agent", ""),
                "objectRef": {k: v for k, v in ref.items() if v is not None},
                "responseStatus": {"code": code}, "requestObject": body,
                "requestReceivedTimestamp": received, "stageTimestamp": micro_time()}

    async def serve(request: Request, group: str, version: str, rest: str) -> Response:
        t, ns, name, sub = resolve(group, version, rest)
        method = request.method
        if t.plural in ("tokenreviews", "subjectaccessreviews") and t.group.startswith(
            ("authentication.", "authorization.")
        ):
            if method != "POST" or name is not None:
                raise MethodNotAllowed(f"{t.plural} only support create")
            body = await _body(request)
            review = policy.token_review if t.plural == "tokenreviews" else policy.subject_access_review
            return js(review(body), 201)
        if t.group == "metrics.k8s.io":
            return metrics(request, t, ns, name)
        if name is None:
            if method == "GET":
                if request.query_params.get("watch") in ("true", "1"):
                    return watch(request, t, ns)
                return list_(request, t, ns)
            if method == "POST":
                obj = cluster.create(t, await _body(request), ns)
                return js(_as(t, obj), 201)
            if method == "DELETE":
                flt = Filter.parse(
                    ns, request.query_params.get("labelSelector"), request.query_params.get("fieldSelector")
                )
                items, _ = cluster.list(t, flt)
                for obj in items:
                    with contextlib.suppress(NotFound):
                        cluster.delete(t, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                return js({"kind": f"{t.kind}List", "apiVersion": t.api_version, "metadata": {}, "items": items})
            raise MethodNotAllowed(f"{method} is not supported on a collection")
        ns = ns or ""
        if sub == "scale":
            if method == "GET":
                return js(scale_of(t, cluster.get(t, ns, name)))
            if method == "PUT":
                return js(cluster.update_scale(t, ns, name, scale_body=await _body(request)))
            if method == "PATCH":
                return js(cluster.update_scale(t, ns, name, content_type=request.headers.get("content-type", ""),
                                               patch_body=await _body(request)))
            raise MethodNotAllowed(f"{method} is not supported on scale")
        if method == "GET":
            obj = _as(t, cluster.get(t, ns, name))
            if _wants_table(request):
                return js(table(t, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}))
            return js(obj)
        if method == "PUT":
            return js(_as(t, cluster.replace(t, ns, name, await _body(request), subresource=sub)))
        if method == "PATCH":
            ctype = request.headers.get("content-type", "")
            body = await _body(request)
            if "apply-patch" in ctype and sub is None and cluster.store.get(t, ns, name) is None:
                return js(_as(t, cluster.create(t, body, ns or None)), 201)
            return js(_as(t, cluster.patch(t, ns, name, ctype, body, subresource=sub)))
        if method == "DELETE" and sub is None:
            pre: Obj = {}
            if request.headers.get("content-length") not in (None, "0"):
                opts = await _body(request) or {}
                pre = (opts.get("preconditions") or {}) if isinstance(opts, dict) else {}
            gone = cluster.delete(t, ns, name, pre.get("uid"), pre.get("resourceVersion"))
            return js(_as(t, gone) if t.kind == "Pod" else _success(t, gone))
        raise MethodNotAllowed(f"{method} is not supported here")

    def list_(request: Request, t: ResourceType, ns: str | None) -> Response:
        q = request.query_params
        items, rv = cluster.list(t, Filter.parse(ns, q.get("labelSelector"), q.get("fieldSelector")))
        token = q.get("continue")
        if token:
            try:
                after = tuple(orjson.loads(base64.urlsafe_b64decode(token.encode())))
            except Exception:
                raise BadRequest("continue: invalid continue token") from None
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > after]
        meta: Obj = {"resourceVersion": str(rv)}
        limit = _int_param(request, "limit")
        if limit and limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            meta["continue"] = base64.urlsafe_b64encode(
                orjson.dumps([last.get("namespace", ""), last["name"]])
            ).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        items = [_as(t, o) for o in items]
        if _wants_table(request):
            return js(table(t, items, meta))
        return js({"kind": f"{t.kind}List", "apiVersion": t.api_version, "metadata": meta, "items": items})

    def watch(request: Request, t: ResourceType, ns: str | None) -> Response:
        q = request.query_params
        flt = Filter.parse(ns, q.get("labelSelector"), q.get("fieldSelector"))
        timeout = _int_param(request, "timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        initial_end = q.get("sendInitialEvents") in ("true", "1")
        rv = None if initial_end else q.get("resourceVersion")
        if rv not in (None, "") and not rv.isdigit():
            raise BadRequest(f"resourceVersion: invalid value {rv!r}: must be a non-negative integer")
        loop = asyncio.get_running_loop()

        def bookmark(seen_rv: int, annotations: Obj | None = None) -> bytes:
            meta: Obj = {"resourceVersion": str(seen_rv)}
            if annotations:
                meta["annotations"] = annotations
            return orjson.dumps({"type": "BOOKMARK", "object": {"kind": t.kind, "apiVersion": t.api_version,
                                                                "metadata": meta}}) + b"\n"

        async def stream() -> AsyncIterator[bytes]:
            # registered once streaming starts, so a client gone before that leaves no watcher behind
            deadline = loop.time() + timeout if timeout else math.inf
            try:
                w = cluster.store.watch(t, flt, rv, loop)
            except Gone as exc:  # as the watch cache does: 200, then one ERROR event carrying the 410 Status
                yield orjson.dumps({"type": "ERROR", "object": exc.to_status()}) + b"\n"
                return
            try:
                if initial_end and bookmarks:
                    while not w.queue.empty():
                        item = w.queue.get_nowait()
                        if item is None:
                            return
                        yield orjson.dumps({"type": item[0], "object": _as(t, item[1])}) + b"\n"
                    yield bookmark(w.seen_rv, {"k8s.io/initial-events-end": "true"})
                while True:
                    wait = min(deadline - loop.time(), sim.bookmark_interval if bookmarks else math.inf)
                    if wait <= 0:
                        return
                    try:
                        item = await asyncio.wait_for(w.queue.get(), None if wait == math.inf else wait)
                    except TimeoutError:
                        if bookmarks and loop.time() < deadline:
                            yield bookmark(w.seen_rv)
                        continue
                    if item is None:
                        return
                    yield orjson.dumps({"type": item[0], "object": _as(t, item[1])}) + b"\n"
            finally:
                cluster.store.unwatch(w)

        return StreamingResponse(stream(), media_type="application/json")

    def metrics(request: Request, t: ResourceType, ns: str | None, name: str | None) -> Response:
        if request.method != "GET":
            raise MethodNotAllowed("metrics.k8s.io is read-only")
        if t.plural == "nodes":
            if name is not None:
                raise NotFound(f'nodemetrics.metrics.k8s.io "{name}" not found')
            return js({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": []})
        if name is not None:
            return js(sim.usage.get(cluster, ns or "", name))
        q = request.query_params
        return js(sim.usage.list(cluster, Filter.parse(ns, q.get("labelSelector"), q.get("fieldSelector"))))

    return app
