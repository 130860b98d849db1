"""A tiny custom/external metrics API upstream for controller-only tests and the benchmark.

KubeSim proxies `custom.metrics.k8s.io` and `external.metrics.k8s.io` to it, as kube-apiserver
proxies to an adapter (and `metrics.k8s.io`, any version, when a test registers it so). Values
are set by the test; pods are whatever the callback says match the request's label selector.
Real HTTP (uvicorn in a thread), real wire format (promscaler.wire).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from kubesim.net import free_port, wait_http
from promscaler import wire
from promscaler.selectors import parse_selector

PodsFor = Callable[[str, str], list[str]]  # (namespace, labelSelector) -> pod names


class FakeMetrics:
    def __init__(self, pods_for: PodsFor, versions: tuple[str, ...] = ("v1beta2", "v1beta1")) -> None:
        self.pods_for = pods_for
        self.versions = versions
        # (ns, metric) -> one value for every pod, a value per pod, or f(pod names) -> value per pod
        self.pods: dict[tuple[str, str], str | dict[str, str] | Callable[[list[str]], str]] = {}
        self.external: dict[tuple[str, str], list[tuple[dict[str, str], str]]] = {}  # (ns, metric) -> [(labels, value)]
        self.objects: dict[tuple[str, str, str, str], str] = {}              # (ns, resource, name, metric) -> value
        self.failing: set[str] = set()                                        # metric names answered with 503
        self.usage: dict[tuple[str, str], dict[str, dict[str, str]]] = {}  # (ns, pod) -> container -> usage
        self.requests = 0
        self.versions_asked: set[str] = set()
        self.resource_versions_asked: set[str] = set()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def app(self) -> FastAPI:
        app = FastAPI()

        def now() -> str:
            return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def unavailable(name: str) -> JSONResponse:
            return JSONResponse(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "ServiceUnavailable",
                    "code": 503,
                    "message": f"metric {name} is failing (test)",
                },
                status_code=503,
            )

        @app.get("/apis/custom.metrics.k8s.io")
        async def custom_group() -> dict:
            return wire.api_group(wire.CUSTOM_GROUP, self.versions)

        @app.get("/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/pods/{name}/{metric}")
        async def pods_metric(version: str, ns: str, name: str, metric: str, request: Request):
            self.requests += 1
            self.versions_asked.add(version)
            if version not in self.versions:
                return JSONResponse(
                    {"kind": "Status", "code": 404, "reason": "NotFound", "message": "no such version"}, status_code=404
                )
            if metric in self.failing:
                return unavailable(metric)
            value = self.pods.get((ns, metric))
            names = self.pods_for(ns, request.query_params.get("labelSelector", "")) if name == "*" else [name]
            if callable(value):
                value = value(names)
            items = []
            for pod in names:
                v = value.get(pod) if isinstance(value, dict) else value
                if v is not None:
                    items.append(
                        wire.custom_metric_value(version, wire.object_reference("Pod", pod, ns), metric, v, now(), 60)
                    )
            return wire.metric_value_list(version, items)

        @app.get("/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/{resource}/{name}/{metric}")
        async def object_metric(version: str, ns: str, resource: str, name: str, metric: str):
            self.requests += 1
            self.versions_asked.add(version)
            if metric in self.failing:
                return unavailable(metric)
            value = self.objects.get((ns, resource, name, metric))
            if value is None:
                return JSONResponse(
                    {
                        "kind": "Status",
                        "code": 404,
                        "reason": "NotFound",
                        "message": f"the server could not find the metric {metric} for {resource} {name}",
                    },
                    status_code=404,
                )
            kind = {"deployments": "Deployment", "services": "Service", "statefulsets": "StatefulSet"}.get(
                resource, resource
            )
            api = "apps/v1" if kind in ("Deployment", "StatefulSet") else "/v1"
            return wire.metric_value_list(version, [wire.custom_metric_value(
                version, wire.object_reference(kind, name, ns, api), metric, value, now(), 60)])

        @app.get("/apis/metrics.k8s.io/{version}/namespaces/{ns}/pods")
        async def pod_metrics(version: str, ns: str, request: Request):
            self.resource_versions_asked.add(version)
            names = self.pods_for(ns, request.query_params.get("labelSelector", ""))
            return wire.pod_metrics_list([wire.pod_metrics(pod, ns, now(), "30s", self.usage[ns, pod], version=version)
                                          for pod in names if (ns, pod) in self.usage], version)

        @app.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}")
        async def external_metric(ns: str, metric: str, request: Request):
            self.requests += 1
            if metric in self.failing:
                return unavailable(metric)
            selector = parse_selector(request.query_params.get("labelSelector", ""))
            items = [wire.external_metric_value(metric, labels, v, now(), 60)
                     for labels, v in self.external.get((ns, metric), []) if selector.matches(labels)]
            return wire.external_metric_value_list(items)

        return app

    def start(self) -> FakeMetrics:
        config = uvicorn.Config(
            self.app(), host="127.0.0.1", port=self.port, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        wait_http(f"{self.url}/apis/custom.metrics.k8s.io")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        time.sleep(0)
