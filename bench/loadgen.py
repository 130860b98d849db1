"""Load generation for the adapter benchmark, in a process of its own so it never shares the
adapter's event loop or CPU time slices.

`wrk` (Debian package `wrk`, C, epoll, keep-alive) when installed; otherwise this module's own
`python bench/loadgen.py URL SECONDS CONNECTIONS PATH...` (aiohttp, one event loop) prints the
same JSON summary. Both rotate over the given paths.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WRK_SCRIPT = """
local paths = {%(paths)s}
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter %% #paths) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %%d, "duration_s": %%.6f, "p50_ms": %%.3f, "p90_ms": %%.3f, "p99_ms": %%.3f, ' ..
    '"max_ms": %%.3f, "non_2xx": %%d, "socket_errors": %%d}\\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3, e.status, e.connect + e.read + e.write + e.timeout))
end
"""


def run_load(base_url: str, paths: list[str], seconds: float, connections: int,
             tls: dict | None = None) -> dict:
    """Drive `connections` keep-alive clients over `paths` for `seconds`; returns the summary.

    `tls` ({"ca", "cert", "key", "headers"}): HTTPS with a client certificate and extra headers
    (the aggregator's front-proxy identity), which wrk cannot send: this module's own client."""
    if shutil.which("wrk") and tls is None:
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write(_WRK_SCRIPT % {"paths": ", ".join(json.dumps(p) for p in paths)})
            script = f.name
        try:
            out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "5s",
                                  "-s", script, base_url], capture_output=True, text=True, timeout=seconds + 60)
        finally:
            Path(script).unlink()
        result = _result(out.stdout, out.stderr)
        result["client"] = "wrk"
    else:
        out = subprocess.run([sys.executable, __file__, json.dumps(tls or {}), base_url, str(seconds), str(connections),
                              *paths], capture_output=True, text=True, timeout=seconds + 60)
        result = _result(out.stdout, out.stderr)
        result["client"] = ("aiohttp, TLS with a client certificate (wrk sends none)" if tls else
                            "aiohttp (install Debian package wrk for a lighter client)")
    result["rps"] = result["requests"] / result["duration_s"] if result["duration_s"] else 0.0
    return result


def _result(stdout: str, stderr: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"load generator failed: {stderr.strip()[-500:] or stdout.strip()[-500:]}")


async def _python_load(base_url: str, seconds: float, connections: int, paths: list[str], tls: dict) -> dict:
    import ssl

    import aiohttp

    ctx: ssl.SSLContext | bool = True
    if tls:
        ctx = ssl.create_default_context(cafile=tls["ca"])
        ctx.load_cert_chain(tls["cert"], tls["key"])

    latencies: list[float] = []
    non_2xx = errors = 0
    deadline = time.perf_counter() + seconds

    async def worker(session: aiohttp.ClientSession, k: int) -> None:
        nonlocal non_2xx, errors
        i = k
        while time.perf_counter() < deadline:
            i += 1
            started = time.perf_counter()
            try:
                async with session.get(base_url + paths[i % len(paths)]) as resp:
                    await resp.read()
                    if resp.status >= 300:
                        non_2xx += 1
            except aiohttp.ClientError:
                errors += 1
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections, ssl=ctx),
                                     headers=(tls or {}).get("headers")) as session:
        await asyncio.gather(*(worker(session, k) for k in range(connections)))
    duration = time.perf_counter() - started
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000 if latencies else 0.0

    return {"requests": len(latencies), "duration_s": duration, "p50_ms": pct(50), "p90_ms": pct(90),
            "p99_ms": pct(99), "max_ms": latencies[-1] * 1000 if latencies else 0.0, "non_2xx": non_2xx,
            "socket_errors": errors}


if __name__ == "__main__":
    opts, url, secs, conns, *ps = sys.argv[1:]
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    print("RESULT " + json.dumps(run(_python_load(url, float(secs), int(conns), ps, json.loads(opts)))))
