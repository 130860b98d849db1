"""Benchmark: what secure serving costs per request.

The same tiny ASGI app served three ways on loopback: plain HTTP; TLS with front-proxy
authentication and a cached SubjectAccessReview (what every HPA request through the aggregator
pays once the cache is warm); and TLS with a fresh handshake per request (new connections).
Sequential requests from one client, so the numbers are per-request latency, not throughput
under load. Writes bench/results/security.json.

    python bench/security_bench.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import uvicorn

from adapter.security import pki
from adapter.security.serve import build_stack, uvicorn_config
from kubesim.apiserver import KubeSim
from kubesim.net import free_port

PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/%2A/http_requests"
HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"kind":"MetricValueList","items":[]}'})


async def _run(server: uvicorn.Server):
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    return task


async def _timed(n: int, make_client, url: str, headers) -> list[float]:
    out = []
    client = make_client()
    for _ in range(n):
        t = time.perf_counter()
        r = await client.get(url, headers=headers)
        out.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
    await client.aclose()
    return out


def _summary(samples: list[float]) -> dict:
    s = sorted(samples)
    return {"requests": len(s), "per_second": round(len(s) / sum(s), 1),
            "p50_ms": round(statistics.median(s) * 1000, 3), "p99_ms": round(s[int(len(s) * 0.99) - 1] * 1000, 3)}


async def main(n: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="security-bench-"))
    ca, fp_ca = pki.new_ca("server-ca"), pki.new_ca("front-proxy-ca")
    pki.write_pair(pki.issue(ca, "s", ips=["127.0.0.1"], server=True), tmp / "s.crt", tmp / "s.key")
    (tmp / "ca.crt").write_bytes(ca.cert_pem)
    (tmp / "fp.crt").write_bytes(fp_ca.cert_pem)
    pki.write_pair(pki.issue(fp_ca, "front-proxy-client", client=True), tmp / "c.crt", tmp / "c.key")
    results: dict = {}
    with KubeSim() as sim:
        sim.allow(HPA, "get", "custom.metrics.k8s.io", "pods/http_requests")
        settings = SimpleNamespace(
            tls_cert_file=str(tmp / "s.crt"), tls_private_key_file=str(tmp / "s.key"),
            requestheader_client_ca_file=str(tmp / "fp.crt"), requestheader_allowed_names=("front-proxy-client",),
            authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True,
            anonymous_auth=False, authorization_always_allow_paths=("/healthz",),
            authorization_webhook_cache_authorized_ttl=600.0,
        )
        plain_port, tls_port = free_port(), free_port()
        plain = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=plain_port, log_level="error", lifespan="off")
        )
        stack = await build_stack(settings, app)
        secure = uvicorn.Server(uvicorn_config(stack, "127.0.0.1", tls_port, log_level="error", lifespan="off"))
        tasks = [await _run(plain), await _run(secure)]
        ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
        ctx.load_cert_chain(tmp / "c.crt", tmp / "c.key")
        hdr = [("X-Remote-User", HPA), ("X-Remote-Group", "system:serviceaccounts")]
        # warm up (and fill the SubjectAccessReview cache)
        await _timed(50, lambda: httpx.AsyncClient(), f"http://127.0.0.1:{plain_port}{PATH}", None)
        await _timed(50, lambda: httpx.AsyncClient(verify=ctx), f"https://127.0.0.1:{tls_port}{PATH}", hdr)
        results["plain_http_keepalive"] = _summary(
            await _timed(n, lambda: httpx.AsyncClient(), f"http://127.0.0.1:{plain_port}{PATH}", None))
        results["tls_frontproxy_cached_sar_keepalive"] = _summary(
            await _timed(n, lambda: httpx.AsyncClient(verify=ctx), f"https://127.0.0.1:{tls_port}{PATH}", hdr))
        fresh = lambda: httpx.AsyncClient(verify=ctx, limits=httpx.Limits(max_keepalive_connections=0))  # noqa: E731
        results["tls_frontproxy_new_connection_each"] = _summary(
            await _timed(max(50, n // 10), fresh, f"https://127.0.0.1:{tls_port}{PATH}", hdr))
        results["subjectaccessreviews_sent"] = stack.authorizer.calls
        plain.should_exit = secure.should_exit = True
        await asyncio.gather(*tasks)
        await stack.aclose()
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000)
    args = ap.parse_args()
    res = asyncio.run(main(args.requests))
    base, sec = res["plain_http_keepalive"], res["tls_frontproxy_cached_sar_keepalive"]
    res["overhead_p50_ms"] = round(sec["p50_ms"] - base["p50_ms"], 3)
    res["machine"] = {"python": platform.python_version(), "cpus_shared": True}
    out = Path(__file__).resolve().parent / "results" / "security.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
