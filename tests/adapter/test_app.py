"""The adapter's app is a FastAPI app (issue 23), with the metrics groups' raw-ASGI hot paths
ahead of it: served in-process here through httpx's ASGI transport."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from adapter.app import create_app
from adapter.settings import parse_settings


async def test_create_app_returns_a_fastapi_app() -> None:
    app = create_app(parse_settings(["--insecure", "--config", "rules.yaml"]))
    assert isinstance(app, FastAPI)
    paths = {getattr(r, "path", None) for r in app.routes}
    assert {"/healthz", "/livez", "/readyz", "/metrics", "/apis", "/openapi/v2", "/openapi/v3"} <= paths
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://adapter") as client:
        assert (await client.get("/healthz")).text == "ok"
        v3 = await client.get("/openapi/v3/apis/custom.metrics.k8s.io/v1beta2")  # a typed path parameter route
        assert v3.status_code == 404 and v3.json()["kind"] == "Status"  # custom metrics are not served here
        # FastAPI's own documents are not served: the aggregator reads /openapi/v2 and /openapi/v3
        for path in ("/docs", "/redoc", "/openapi.json"):
            r = await client.get(path)
            assert r.status_code == 404 and r.json()["kind"] == "Status", path
        r = await client.post("/apis")
        assert r.status_code == 405 and r.json()["reason"] == "MethodNotAllowed"
