"""A request fuzzer: 3,000 hostile requests (odd paths, encodings, selectors, methods, headers)
against the real adapter process and a real Prometheus. Whatever the request, the answer is never
a 500 and the adapter logs no traceback; errors from the metrics API are metav1.Status."""

from __future__ import annotations

import random
import string
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import httpx
import pytest

from kubesim.apiserver import KubeSim

from .conftest import RULES, AdapterProcess

REQUESTS = 3000
PREFIXES = ["/apis/custom.metrics.k8s.io/v1beta2", "/apis/custom.metrics.k8s.io/v1beta1",
            "/apis/external.metrics.k8s.io/v1beta1", "/apis/custom.metrics.k8s.io", "/apis", "",
            "/apis/custom.metrics.k8s.io/v9", "/apis/external.metrics.k8s.io/v1beta1/namespaces"]
WORDS = ["namespaces", "web", "shop", "pods", "*", "%2A", "web-1", "web-old", "http_requests", "metrics",
         "queue_messages_ready", "nodes", "node-1", "node_load", "deployments.apps", "frontend", "services",
         "namespace_quota_used", "jobs_processed_per_second", "busy_ratio", "cluster_queue", "pods.", "..", ".",
         "", "deployment_queue_depth", "rollouts.argoproj.io", "pod", "Pods", "PODS", "readyz", "openapi"]
NASTY = ["%ff%fe", "%ef%bf%bd", "%00", "%0a", "%c0%af", "%2f", "%25", "%", "%zz", "a%2Fb", "\u00e9", "\U0001f600",
         "web\",pod=~\".*", "web|shop", "}", "{", "\\", "'", "`", "$(id)", "<<.Series>>", "{{.}}", "a" * 300,
         "x" * 5000, "..%2f..%2f", "%2e%2e", "web-1\r\nX-Evil: 1", "\t", " ", "+", ";", "?", "#", "&"]
SELECTOR_BITS = ["app", "app=web", "app!=web", "app==web", "app in (web,shop)", "app notin (web)", "!app",
                 "app in ()", "app in (", "app)", "=", "!=", ",", ",,", "a" * 64, "a" * 70 + "=b", "app=" + "v" * 70,
                 "app=\u00e9", "x/y=z", "example.com/app=web", "-bad=1", "app>1", "app<2", "app gt 1", "app=%ff",
                 "method in (GET,POST)", "method=POST", "method!=GET", "method", "!method", "pod=web-1", "  ", "\x00",
                 "app=web,", "in=in", "notin notin (notin)", "a=b=c", "a in (b c)", "'a'='b'", "a=\"b\""]
HEADERS = [{}, {"Accept": "application/vnd.kubernetes.protobuf"}, {"Accept": "*/*;q=x"},
           {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, {"Content-Type": "application/yaml"},
           {"Accept-Encoding": "gzip, br, zstd"}, {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"},
           {"Authorization": "Bearer " + "x" * 4000}, {"Authorization": "Basic %%%"}, {"Host": "evil"},
           {"Content-Length": "0"}, {"Accept": "\u00e9".encode().decode("latin-1")}, {"X-" + "a" * 200: "b"},
           {"If-None-Match": "*"}, {"Range": "bytes=0-1"}]
METHODS = ["GET"] * 20 + ["POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _segment(rnd: random.Random) -> str:
    roll = rnd.random()
    if roll < 0.55:
        return quote(rnd.choice(WORDS), safe="*%")
    if roll < 0.8:
        nasty = rnd.choice(NASTY)
        raw_ok = nasty.isascii() and nasty.isprintable() and not any(c in nasty for c in " #?")
        return nasty if raw_ok and rnd.random() < 0.5 else quote(nasty, safe="%")
    if roll < 0.9:
        return "".join(f"%{rnd.randrange(256):02x}" for _ in range(rnd.randint(1, 6)))
    return quote("".join(rnd.choice(string.printable) for _ in range(rnd.randint(1, 40))), safe="")


def _selector(rnd: random.Random) -> str:
    return ",".join(rnd.choice(SELECTOR_BITS) for _ in range(rnd.randint(1, 4)))


def _query(rnd: random.Random) -> str:
    params = []
    for _ in range(rnd.choice([0, 0, 1, 1, 2, 3])):
        key = rnd.choice(["labelSelector", "metricLabelSelector", "labelSelector", "fieldSelector", "watch",
                          "limit", "verbose", "%ff", "labelSelector%00", ""])
        raw = _selector(rnd)
        value = quote(raw, safe="") if rnd.random() < 0.8 else raw.replace("&", "").replace("#", "")
        if rnd.random() < 0.1:
            value += rnd.choice(["%", "%f", "%ff%fe", "%zz"])
        params.append(f"{key}={value}")
    return "&".join(params)


VALID = [  # paths that answer: each request mutates a few of their segments
    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests",
    "/apis/custom.metrics.k8s.io/v1beta1/namespaces/web/pods/*/http_requests",
    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/batch/pods/*/jobs_processed_per_second",
    "/apis/custom.metrics.k8s.io/v1beta2/nodes/node-1/node_load",
    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/metrics/namespace_quota_used",
    "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/deployments.apps/frontend/deployment_queue_depth",
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/web/queue_messages_ready",
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/any/cluster_queue",
]


def _path(rnd: random.Random) -> str:
    if rnd.random() < 0.4:
        return rnd.choice(PREFIXES) + "".join("/" + _segment(rnd) for _ in range(rnd.randint(0, 7)))
    parts = rnd.choice(VALID).split("/")
    for _ in range(rnd.randint(1, 2)):  # below /apis/<group>/<version>: the names
        i = rnd.randrange(4, len(parts))
        parts[i] = _segment(rnd) if rnd.random() < 0.5 else parts[i] + _segment(rnd)
    return "/".join(parts)


def _request(rnd: random.Random) -> tuple[str, str, dict[str, str]]:
    path = _path(rnd)
    if rnd.random() < 0.05:
        path = path.replace("/", "//", 1)
    query = _query(rnd)
    return rnd.choice(METHODS), path + ("?" + query if query else ""), rnd.choice(HEADERS)


@pytest.fixture(scope="module")
def clustered(prometheus):
    """The adapter connected to a cluster: `*` and labelSelector answers go through the watch cache."""
    with KubeSim() as sim:
        for ns, name in (("web", "web-1"), ("web", "web-2"), ("shop", "shop-1")):
            sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": ns, "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "app", "image": "app"}]}})
        a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES),
                           "--kubeconfig", sim.kubeconfig_path).wait_ready()
        yield a
        a.stop()


@pytest.mark.parametrize("where", ["offline", "cluster"])
def test_no_request_gets_a_500(request, where):
    adapter: AdapterProcess = request.getfixturevalue("adapter" if where == "offline" else "clustered")
    rnd = random.Random(12 if where == "offline" else 13)  # fixed: a failure reproduces
    requests = [_request(rnd) for _ in range(REQUESTS)]
    with httpx.Client(base_url=adapter.url, timeout=30) as client:
        def send(req: tuple[str, str, dict[str, str]]) -> tuple[int, str, str]:
            method, url, headers = req
            try:
                resp = client.request(method, url, headers={k: v.encode() for k, v in headers.items()})
            except (httpx.InvalidURL, httpx.LocalProtocolError, UnicodeEncodeError) as exc:
                return -1, url, str(exc)  # not sendable by this client: nothing reached the adapter
            return resp.status_code, url, resp.text[:300]

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(send, requests))
    sent = [r for r in results if r[0] != -1]
    assert len(sent) > REQUESTS * 0.95, [r for r in results if r[0] == -1][:5]
    failures = [r for r in sent if r[0] >= 500 and r[0] != 503]
    assert not failures, failures[:10]
    codes = {r[0] for r in sent}
    assert {200, 400, 404} <= codes  # the corpus reaches real answers as well as errors
    assert "Traceback" not in adapter.stderr()
