"""One thin JSON client over the official `kubernetes.aio` client's configuration and connection pool,
for the adapter and the controller.

Why not the generated typed APIs: both talk to many kinds (any `*/scale`, three metrics APIs, the
CRD, CRDs found by discovery) and need raw dicts fast; model deserialization of 1,000 autoscalers'
pods would dominate the CPU budget, and the typed classes import the client's whole pydantic model
package (seconds of the adapter's start-up, issue 23). This keeps the official client's
configuration loading, authentication (`Configuration.auth_settings`, with its token refresh hook)
and aiohttp connection pool (`rest.RESTClientObject`: its TLS context, pool size and proxy), and
speaks plain JSON.

Why not its `ApiClient` either: building a request (URL, query, headers, the bearer token) is all
this needs of it, and importing it imports pydantic and dateutil, 80-110 ms of CPU on a 2-core
machine, on the critical path of the adapter's and the controller's start (issue 28). So the
request is built here as `ApiClient.param_serialize` builds it.

Imports only `kubernetes.aio.client`'s `rest` and `configuration` submodules: the adapter leaves
the client's parent packages unexecuted (adapter/__main__.py, tests/adapter/test_startup.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
from kubernetes.aio.client.configuration import Configuration
from kubernetes.aio.client.rest import RESTClientObject

from promscaler import kubeconfig as kubeconfig_chain
from promscaler.ratelimit import TokenBucket

__all__ = ["ApiError", "Kube", "Obj", "load_configuration", "query"]

Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer, carrying the metav1.Status reason when the server sent one; `body` is the
    answer as sent (empty for a watch's ERROR event)."""

    def __init__(self, status: int, reason: str, message: str, body: bytes = b"") -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body

    @property
    def phrase(self) -> str:
        """The status line's standard words (`Service Unavailable`, what kube-apiserver sends), or ""."""
        try:
            return HTTPStatus(self.status).phrase
        except ValueError:
            return ""

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


async def load_configuration(kubeconfig: str | None, context: str | None = None) -> Configuration:
    """`--kubeconfig`, else $KUBECONFIG, else in-cluster, else ~/.kube/config (promscaler.kubeconfig)."""
    cfg, _ = await kubeconfig_chain.load_configuration(kubeconfig, context)
    return cfg


def _error(status: int, body: bytes, fallback: str) -> ApiError:
    try:
        obj = orjson.loads(body)
        if isinstance(obj, dict) and obj.get("kind") == "Status":
            return ApiError(status, str(obj.get("reason") or fallback), str(obj.get("message") or ""), body)
    except orjson.JSONDecodeError:
        pass
    return ApiError(status, fallback, body[:200].decode("utf-8", "replace").strip(), body)


class Kube:
    """JSON requests and watch streams against one API server.

    `pool_size` None keeps the configuration's own connection pool size."""

    def __init__(self, configuration: Configuration, pool_size: int | None = 64,
                 user_agent: str = "promscaler-autoscaler") -> None:
        if pool_size is not None:
            configuration.connection_pool_maxsize = pool_size
        self.configuration = configuration
        self.rest = RESTClientObject(configuration)
        self.user_agent = user_agent
        self.limiter: TokenBucket | None = None

    def rate_limit(self, qps: float, burst: int) -> None:
        """Limit requests (watch starts included, as client-go does) to `qps` per second, bursts of `burst`."""
        self.limiter = TokenBucket(qps, burst) if qps > 0 else None

    async def close(self) -> None:
        await self.rest.close()

    async def prepare(self, path: str, query: Sequence[tuple[str, Any]] | None = None,
                      accept: str = "application/json", content_type: str = "application/json",
                      ) -> tuple[str, dict[str, str]]:
        """The URL and headers of a request, as the official ApiClient's `param_serialize` builds them
        for the `BearerToken` scheme. The client's auth settings are asked each time, so that its
        refresh hook (the in-cluster token file, re-read each minute) runs and the current token is sent."""
        url = self.configuration.host + path
        if query:
            url += "?" + _query_string(query)
        headers = {"Accept": accept, "Content-Type": content_type, "User-Agent": self.user_agent}
        auth = (await self.configuration.auth_settings()).get("BearerToken")  # an api key, in a header
        if auth and auth["value"] is not None:
            headers[auth["key"]] = auth["value"]
        return url, headers

    async def _send(self, method: str, path: str, query: Sequence[tuple[str, Any]] | None,
                    body: Any, content_type: str, timeout: aiohttp.ClientTimeout,
                    accept: str = "application/json") -> Any:
        if self.limiter is not None:
            await self.limiter.acquire()
        url, headers = await self.prepare(path, query, accept, content_type)
        data = orjson.dumps(body) if body is not None else None
        # The client's own aiohttp session (its TLS context, pool and proxy settings), used directly
        # so that bodies are orjson bytes and watch responses can be streamed line by line.
        if self.rest.pool_manager is None:
            self.rest.pool_manager = self.rest._create_pool_manager()
        extra: dict[str, Any] = {}
        cfg = self.configuration
        if cfg.proxy:
            extra["proxy"] = cfg.proxy
            if cfg.proxy_headers:
                extra["proxy_headers"] = cfg.proxy_headers
        if cfg.tls_server_name:
            extra["server_hostname"] = cfg.tls_server_name
        return await self.rest.pool_manager.request(method, url, headers=headers, data=data, timeout=timeout,
                                                    **extra)

    async def request(self, method: str, path: str, query: Sequence[tuple[str, Any]] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      timeout: float = 30.0, accept: str = "application/json") -> Obj:
        """One request; the decoded JSON body, or ApiError. `accept`: the media types asked for
        (a JSON form: aggregated discovery)."""
        resp = await self._send(method, path, query, body, content_type, aiohttp.ClientTimeout(total=timeout),
                                accept)
        async with resp:
            raw = await resp.read()
            if resp.status >= 300:
                raise _error(resp.status, raw, resp.reason or "Error")
        return orjson.loads(raw) if raw else {}

    async def get(self, path: str, query: Sequence[tuple[str, Any]] | None = None) -> Obj:
        return await self.request("GET", path, query)

    async def watch(self, path: str, query: Sequence[tuple[str, Any]], timeout: float) -> AsyncIterator[Obj]:
        """Watch events (`{"type", "object"}`) until the server ends the stream; ERROR events raise."""
        q = [*query, ("watch", "1"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", int(timeout))]
        # no total limit: the server ends the stream after timeoutSeconds; a silent connection is broken
        resp = await self._send(
            "GET", path, q, None, "application/json", aiohttp.ClientTimeout(total=None, sock_read=timeout + 60)
        )
        async with resp:
            if resp.status >= 300:
                raise _error(resp.status, await resp.read(), resp.reason or "Error")
            async for line in resp.content:
                line = line.strip()
                if not line:
                    continue
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise ApiError(
                        int(obj.get("code") or 500), str(obj.get("reason") or "Error"), str(obj.get("message") or "")
                    )
                yield event


def _query_string(params: Sequence[tuple[str, Any]]) -> str:
    """`k=v&...` as ApiClient.parameters_to_url_query writes it: booleans `true`/`false`, values
    percent-encoded (`/` kept), names as given."""
    return "&".join(f"{k}={quote(str(v).lower() if isinstance(v, bool) else str(v))}" for k, v in params)


def query(**params: Any) -> list[tuple[str, Any]]:
    """Query parameters without the unset ones."""
    return [(k, v) for k, v in params.items() if v is not None and v != ""]
