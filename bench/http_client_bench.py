"""Candidate asyncio HTTP clients for the adapter's second hop (issue 17.1): one small instant
query to a real Prometheus over a pooled keep-alive connection, one request at a time (as one
uncached pod request makes it), interleaved round by round under uvloop. Prints and writes
bench/results/http_client.json: p50/p99 per client, the CPU each request costs this process
(its thread's CPU time: what the machine's load does not stretch), and the ratio to httpx.

    .venv/bin/python bench/http_client_bench.py [--rounds N] [--prometheus-url URL]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
QUERY = "/api/v1/query?query=" + "sum%28up%29"


async def _clients(base: str) -> dict[str, tuple[Callable[[], Awaitable[bytes]], Callable[[], Awaitable[None]]]]:
    import aiohttp
    import httpcore

    hx = httpx.AsyncClient(base_url=base, verify=False, limits=httpx.Limits(max_keepalive_connections=32))
    hdr = {"Accept-Encoding": "identity", "Accept": "application/json"}

    async def via_httpx() -> bytes:
        r = await hx.send(hx.build_request("GET", QUERY, headers=hdr), stream=True)
        try:
            return b"".join([c async for c in r.aiter_raw()])
        finally:
            await r.aclose()

    ah = aiohttp.ClientSession(base, auto_decompress=False,
                               connector=aiohttp.TCPConnector(limit=64, keepalive_timeout=60))

    async def via_aiohttp() -> bytes:
        async with ah.get(QUERY, headers=hdr) as r:
            return b"".join([c async for c in r.content.iter_any()])

    pool = httpcore.AsyncConnectionPool(max_connections=64, keepalive_expiry=60)
    url = (base + QUERY).encode()

    async def via_httpcore() -> bytes:
        async with pool.stream("GET", url, headers=list(hdr.items())) as r:
            return b"".join([c async for c in r.aiter_stream()])

    return {"httpx": (via_httpx, hx.aclose), "aiohttp": (via_aiohttp, ah.close),
            "httpcore": (via_httpcore, pool.aclose)}


async def _run(base: str, rounds: int) -> dict:
    clients = await _clients(base)
    times: dict[str, list[float]] = {name: [] for name in clients}
    cpu_ns = dict.fromkeys(clients, 0)
    for get, _ in clients.values():  # warm-up: connections
        for _ in range(20):
            await get()
    for i in range(rounds):
        order = list(clients.items())
        for name, (get, _) in order if i % 2 == 0 else order[::-1]:
            started, cpu = time.perf_counter(), time.thread_time_ns()
            await get()
            times[name].append((time.perf_counter() - started) * 1000)
            cpu_ns[name] += time.thread_time_ns() - cpu
    for _, close in clients.values():
        await close()
    out: dict = {}
    for name, ms in times.items():
        ms.sort()
        out[name] = {"n": len(ms), "p50_ms": round(statistics.median(ms), 3),
                     "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3),
                     "cpu_us": round(cpu_ns[name] / len(ms) / 1000, 1)}
    for name in out:
        out[name]["p50_vs_httpx"] = round(out[name]["p50_ms"] / out["httpx"]["p50_ms"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--prometheus-url", default="", help="an existing Prometheus (else one is started, empty)")
    args = p.parse_args(argv)
    import uvloop

    from kubesim.prometheus import PrometheusServer

    prom = None
    base = args.prometheus_url
    if not base:
        prom = PrometheusServer().start(timeout=60)
        base = prom.url
    try:
        result = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": args.rounds,
                  "load_average": Path("/proc/loadavg").read_text().split()[:3],
                  "clients": uvloop.run(_run(base, args.rounds))}
    finally:
        if prom is not None:
            prom.close()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "http_client.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
