"""Fixtures: one started KubeSim per test module (tests isolate themselves by namespace) and
real `kubernetes` clients pointed at it through its kubeconfig; an APIService backend (a tiny
FastAPI app on a free port)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from kubernetes import client, config

from kubesim.apiserver import KubeSim
from kubesim.net import free_port, wait_http
from promscaler import wire
from promscaler.status import status_body

_ns = itertools.count()


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(ready_delay=0.3, bookmark_interval=0.2) as s:
        yield s


@pytest.fixture
def ns(sim: KubeSim) -> str:
    """A fresh namespace per test."""
    name = f"t{next(_ns)}"
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def api(sim: KubeSim) -> Iterator[client.ApiClient]:
    """A sync ApiClient loaded from the kubeconfig file, as users load it."""
    conf = client.Configuration()
    config.load_kube_config(config_file=sim.kubeconfig_path, client_configuration=conf)
    with client.ApiClient(conf) as c:
        yield c


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def upstream_app() -> FastAPI:
    app = FastAPI()

    @app.get("/apis/custom.metrics.k8s.io/v1beta2")
    async def discovery() -> dict:
        return wire.api_resource_list("custom.metrics.k8s.io/v1beta2",
                                      [wire.api_resource("pods/http_requests", "MetricValueList", True)])

    @app.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/{name}/{metric}")
    async def metric(request: Request, ns: str, name: str, metric: str) -> JSONResponse:
        if metric == "missing":
            return JSONResponse(status_body(404, "NotFound", f"the server could not find the metric {metric} for pods"),
                                status_code=404)
        item = wire.custom_metric_value("v1beta2", wire.object_reference("Pod", name, ns), metric, "500m",
                                        "2026-01-01T00:00:00Z")
        return JSONResponse(wire.metric_value_list("v1beta2", [item]) | {"query": str(request.url.query),
                                                                        "user": request.headers.get("x-remote-user")})

    @app.get("/apis/metrics.k8s.io/{version}/namespaces/{ns}/pods")  # any version: kubesim picks what it routes
    async def pod_metrics(version: str, ns: str) -> dict:
        return wire.pod_metrics_list([wire.pod_metrics("from-upstream", ns, "2026-01-01T00:00:00Z", "3m0s",
                                                       {"app": {"cpu": "1m", "memory": "1Ki"}}, version=version)],
                                     version)

    return app


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(upstream_app(), host="127.0.0.1", port=port, log_level="warning",
                                          timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/apis/custom.metrics.k8s.io/v1beta2")
    yield url
    server.should_exit = True
    thread.join(timeout=10)
