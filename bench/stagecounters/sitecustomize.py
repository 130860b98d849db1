"""Per-stage counters inside an adapter process, for bench/onepod_breakdown.py only.

Python imports `sitecustomize` at start from the path; bench/onepod_breakdown.py puts this
directory on the adapter's PYTHONPATH with PROMSCALER_STAGES naming a JSON file. Then each stage
of a request (authentication, authorization, routing, the query, the round trip to Prometheus,
encoding, the response write) is wrapped to add up its calls, wall time (perf_counter_ns) and the
thread's CPU time (thread_time_ns), written to that file every half second. The wrappers cost
about a microsecond each: the totals are a little higher than the process's own.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import threading
import time
from collections import defaultdict
from typing import Any

OUT = os.environ.get("PROMSCALER_STAGES")
STATS: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # calls, wall ns, CPU ns


def _count(name: str, wall: int, cpu: int) -> None:
    s = STATS[name]
    s[0] += 1
    s[1] += time.perf_counter_ns() - wall
    s[2] += time.thread_time_ns() - cpu


def _timed(f: Any, name: str) -> Any:
    """`f` (a plain function) counted as stage `name`."""
    def counted(*a: Any, **k: Any) -> Any:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return f(*a, **k)
        finally:
            _count(name, wall, cpu)
    return counted


def wrap(owner: Any, attr: str, name: str) -> None:
    """Count every call of `owner.attr` (a coroutine function or a plain one) as stage `name`."""
    f = getattr(owner, attr, None)
    if f is None:  # a build without it
        return
    if inspect.iscoroutinefunction(f):
        @functools.wraps(f)
        async def counted(*a: Any, **k: Any) -> Any:
            wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
            try:
                return await f(*a, **k)
            finally:
                _count(name, wall, cpu)
        setattr(owner, attr, counted)
    else:
        setattr(owner, attr, functools.wraps(f)(_timed(f, name)))


class _Counted:
    """A module seen through a proxy whose `attr` is counted (`orjson.loads` in one module only)."""

    def __init__(self, module: Any, name: str, attr: str) -> None:
        self._module = module
        setattr(self, attr, _timed(getattr(module, attr), name))

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module, attr)


def install() -> None:
    import orjson

    from adapter.__main__ import prepare

    prepare()  # as the launcher does, before anything imports the kubernetes client
    from adapter import metricroutes, prometheus, provider, querycache
    from adapter.security import authn, authz, middleware, peer, serve

    wrap(peer._TLSScopeApp, "__call__", "asgi")  # everything after the request's headers are parsed
    wrap(serve.HTTP_PROTOCOL, "data_received", "http_parse")
    wrap(middleware.SecurityMiddleware, "_authenticate", "authn")
    wrap(authz.Authorizer, "authorize", "authz")
    wrap(middleware, "request_info", "request_info")
    wrap(authn.Authenticator, "strip_headers", "strip_headers")
    from adapter.front import Front

    wrap(Front, "__call__", "front")
    wrap(metricroutes, "send_json", "response_write")
    wrap(metricroutes, "_custom_items", "encode_items")
    wrap(metricroutes.wire, "metric_value_list", "encode_list")
    metricroutes.orjson = _Counted(orjson, "encode_dumps", "dumps")
    wrap(provider.CustomMetricsProvider, "get_metric_by_name", "provider")
    wrap(provider, "_run", "query_run")
    wrap(prometheus.PrometheusClient, "_query", "prometheus_query")
    prometheus.orjson = _Counted(orjson, "decode", "loads")
    wrap(querycache.QueryCache, "lookup", "query_cache")


def _dump_forever() -> None:
    while True:
        time.sleep(0.5)
        tmp = f"{OUT}.tmp"
        with open(tmp, "w") as f:
            json.dump(dict(STATS), f)
        os.replace(tmp, str(OUT))


if OUT:
    install()
    threading.Thread(target=_dump_forever, name="stage-counters", daemon=True).start()
