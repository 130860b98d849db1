"""Aggregated APIs: `metrics.k8s.io` served from configured pod usages (what metrics-server
would report), and APIService-style proxying of other groups (custom and external metrics) to a
running adapter over one shared `httpx.AsyncClient`. A backend registered for `metrics.k8s.io`
(an adapter serving `resourceRules`) takes that group over until it is removed. Each backend
stands for one APIService per version it lists: only those versions are proxied."""

from __future__ import annotations

import asyncio
import ssl
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from kubesim import discovery
from kubesim.cluster import Cluster
from kubesim.fields import Filter
from promscaler import wire
from promscaler.apidiscovery import AGGREGATED_ACCEPT, is_aggregated
from promscaler.status import NotFound, ServiceUnavailable

__all__ = ["Aggregator", "Backend", "PodUsage"]

Obj = dict[str, Any]
_FORWARD_HEADERS = ("accept", "content-type", "user-agent")


@dataclass(frozen=True, slots=True)
class Backend:
    """An APIService: where a group is served. TLS backends get their own client (CA, client cert)."""

    group: str
    url: str
    versions: tuple[str, ...]
    verify: str | bool = True
    cert: tuple[str, str] | None = None  # the front-proxy client certificate and key
    timeout: float = 10.0

    @property
    def needs_own_client(self) -> bool:
        return self.url.startswith("https:")


def _tls_context(b: Backend) -> ssl.SSLContext | bool:
    """Server verification against the APIService's CA bundle, plus the front-proxy client cert."""
    if b.verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    elif isinstance(b.verify, str):
        ctx = ssl.create_default_context(cafile=b.verify)
    else:
        ctx = ssl.create_default_context()
    if b.cert:
        ctx.load_cert_chain(*b.cert)
    return ctx


def default_versions(group: str) -> tuple[str, ...]:
    """The APIServices the adapter's manifests register for `group`, preferred first."""
    if group == wire.CUSTOM_GROUP:
        return wire.CUSTOM_VERSIONS
    if group == wire.EXTERNAL_GROUP:
        return wire.EXTERNAL_VERSIONS
    if group == wire.RESOURCE_GROUP:
        return wire.RESOURCE_VERSIONS
    return ("v1beta1",)


class Aggregator:
    def __init__(self) -> None:
        self.backends: dict[str, Backend] = {}
        self._client: httpx.AsyncClient | None = None
        self._tls_clients: dict[str, httpx.AsyncClient] = {}
        self._stale: list[httpx.AsyncClient] = []

    def set(self, group: str, url: str | None, versions: tuple[str, ...] | None = None,
            verify: str | bool = True, cert: tuple[str, str] | None = None, timeout: float = 10.0) -> None:
        stale = self._tls_clients.pop(group, None)  # its TLS settings may change: closed at shutdown
        if stale is not None:
            self._stale.append(stale)
        if url is None:
            self.backends.pop(group, None)
            return
        self.backends[group] = Backend(group, url.rstrip("/"), tuple(versions or default_versions(group)), verify, cert,
                                       timeout)

    def routes(self, group: str, version: str) -> bool:
        """Whether an APIService is registered for exactly this group version: kube-aggregator
        proxies only those (another version of the group is the local server's, mostly a 404)."""
        b = self.backends.get(group)
        return b is not None and version in b.versions

    def _client_for(self, b: Backend) -> httpx.AsyncClient:
        if b.needs_own_client:
            client = self._tls_clients.get(b.group)
            if client is None:
                client = self._tls_clients[b.group] = httpx.AsyncClient(verify=_tls_context(b))
            return client
        if self._client is None:
            self._client = httpx.AsyncClient()
        return self._client

    async def proxy(self, request: Request, group: str, user: Obj | None) -> Response:
        b = self.backends[group]
        headers = [(k, v) for k, v in request.headers.items() if k in _FORWARD_HEADERS]
        if user is not None:  # what kube-aggregator asserts to the backend (trusted via the front-proxy cert)
            headers.append(("X-Remote-User", user["username"]))
            # One header per group, as kube-aggregator sends them; never comma-joined.
            groups = [*user.get("groups", []), "system:authenticated"]
            headers += [("X-Remote-Group", g) for g in dict.fromkeys(groups)]
        raw = request.scope.get("raw_path")  # keep the caller's escaping
        url = b.url + (raw.decode("latin-1") if raw else request.url.path)
        try:
            r = await self._client_for(b).request(
                request.method, url, params=request.url.query or None, headers=headers, content=await request.body(),
                timeout=b.timeout)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(
                f"the server is currently unable to handle the request: {group} backend {b.url} is unavailable "
                f"({type(exc).__name__}: {exc or 'no answer'})"
            ) from None
        keep = {k: v for k, v in r.headers.items() if k.lower() in ("content-type", "cache-control")}
        return Response(r.content, status_code=r.status_code, headers=keep)

    async def discovery(self, b: Backend) -> list[Obj]:
        """The backend's versions as APIVersionDiscovery entries, read as kube-aggregator reads them:
        its `/apis` asking for the aggregated form, else each version's legacy APIResourceList. A
        version that cannot be read is listed without resources, `Stale`."""
        client = self._client_for(b)
        headers = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}

        async def get(path: str, accept: str = "application/json") -> Any:
            r = await client.get(b.url + path, headers={**headers, "Accept": accept}, timeout=b.timeout)
            r.raise_for_status()
            return r.json()

        try:
            doc = await get("/apis", AGGREGATED_ACCEPT)
        except httpx.TransportError:  # no answer: nothing else will answer either
            return [discovery.version_discovery(b.group, v, (), fresh=False) for v in b.versions]
        except (httpx.HTTPError, ValueError):
            doc = None
        if isinstance(doc, dict) and is_aggregated(doc):
            served = {v.get("version"): v for item in doc.get("items") or ()
                      if (item.get("metadata") or {}).get("name") == b.group for v in item.get("versions") or ()}
            return [served.get(v) or discovery.version_discovery(b.group, v, (), fresh=False) for v in b.versions]

        async def legacy(version: str) -> Obj:
            try:
                listed = await get(f"/apis/{b.group}/{version}")
                return discovery.version_discovery(b.group, version, listed.get("resources") or ())
            except (httpx.HTTPError, ValueError, AttributeError):
                return discovery.version_discovery(b.group, version, (), fresh=False)

        return list(await asyncio.gather(*(legacy(v) for v in b.versions)))

    async def aclose(self) -> None:
        clients = [c for c in [self._client, *self._tls_clients.values(), *self._stale] if c is not None]
        self._client, self._tls_clients, self._stale = None, {}, []
        for c in clients:
            await c.aclose()


class PodUsage:
    """Per-pod container usage (`{"app": {"cpu": "250m", "memory": "200Mi"}}`), served as
    PodMetrics for pods that exist, with the pods' labels, as metrics-server does."""

    def __init__(self, window: str = "30s") -> None:
        self.window = window
        self._usage: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
        self._lock = threading.Lock()

    def set(self, namespace: str, pod: str, containers: dict[str, dict[str, str]] | None) -> None:
        with self._lock:
            if containers is None:
                self._usage.pop((namespace, pod), None)
            else:
                self._usage[(namespace, pod)] = {c: dict(u) for c, u in containers.items()}

    def _metrics(self, pod: Obj, at: datetime) -> Obj | None:
        meta = pod["metadata"]
        with self._lock:
            usage = self._usage.get((meta.get("namespace", ""), meta["name"]))
        if usage is None:
            return None
        return wire.pod_metrics(meta["name"], meta.get("namespace", ""), at, self.window, usage, meta.get("labels"))

    def get(self, cluster: Cluster, namespace: str, name: str) -> Obj:
        pod = cluster.store.get(cluster.type("v1", "Pod"), namespace, name)
        item = self._metrics(pod, datetime.now(UTC)) if pod is not None else None
        if item is None:
            raise NotFound(f'podmetrics.metrics.k8s.io "{namespace}/{name}" not found',
                           {"name": name, "group": "metrics.k8s.io", "kind": "pods"})
        return item

    def list(self, cluster: Cluster, flt: Filter) -> Obj:
        pods, _ = cluster.list(cluster.type("v1", "Pod"), flt)
        at = datetime.now(UTC)
        return wire.pod_metrics_list(m for m in (self._metrics(p, at) for p in pods) if m is not None)
