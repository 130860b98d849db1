"""The real adapter process (`python -m adapter --secure-port ...`) behind real TLS, with real
Prometheus and KubeSim answering TokenReviews and SubjectAccessReviews: what kube-apiserver's
aggregator and the HPA controller do, end to end."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from cryptography.hazmat.primitives.serialization import Encoding

from adapter.security import pki
from kubesim.adapterrules import counter_rate_rule
from kubesim.processes import AdapterProcess
from kubesim.prometheus import start_backfilled

HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
METRIC = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/%2A/http_requests?labelSelector=app%3Dweb"
RULES = yaml.safe_dump({"rules": [counter_rate_rule('http_requests_total{namespace!="",pod!=""}')]})


def _openmetrics(now: int) -> str:
    lines = ["# TYPE http_requests counter"]
    for pod, rate in (("web-1", 2.0), ("web-2", 4.0)):
        for t in range(now - 900, now + 900, 15):
            lines.append(f'http_requests_total{{namespace="web",pod="{pod}"}} {rate * (t - now + 900)} {t}')
    return "\n".join([*lines, "# EOF"]) + "\n"


class Env:
    def __init__(self, tmp: Path, sim, prom_url: str, rules: str = RULES) -> None:
        self.tmp, self.sim = tmp, sim
        self.server_ca = pki.new_ca("server-ca")
        self.front_proxy_ca = pki.new_ca("front-proxy-ca")
        (tmp / "server-ca.crt").write_bytes(self.server_ca.cert_pem)
        (tmp / "front-proxy-ca.crt").write_bytes(self.front_proxy_ca.cert_pem)
        self.serving = pki.issue(self.server_ca, "adapter", dns=["localhost"], ips=["127.0.0.1"], server=True)
        pki.write_pair(self.serving, tmp / "tls.crt", tmp / "tls.key")
        (tmp / "rules.yaml").write_text(rules)
        kubeconfig = str(sim.kubeconfig_path)
        self.adapter = AdapterProcess(
            "--prometheus-url", prom_url, "--config", str(tmp / "rules.yaml"),
            "--tls-cert-file", str(tmp / "tls.crt"), "--tls-private-key-file", str(tmp / "tls.key"),
            "--requestheader-client-ca-file", str(tmp / "front-proxy-ca.crt"),
            "--requestheader-allowed-names", "front-proxy-client",
            "--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
            "--authorization-kubeconfig", kubeconfig, "--anonymous-auth=false",
            "--authorization-webhook-cache-unauthorized-ttl", "0s",
            secure=True,
        )
        self.port, self.url = self.adapter.port, self.adapter.url

    def wait_ready(self, timeout: float = 30.0) -> None:
        self.adapter.wait_ready(timeout)

    def ctx(self, cert: pki.KeyPair | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.tmp / "server-ca.crt"))
        if cert is not None:
            serial = cert.cert.serial_number
            crt, key = self.tmp / f"client-{serial}.crt", self.tmp / f"client-{serial}.key"
            pki.write_pair(cert, crt, key)
            ctx.load_cert_chain(crt, key)
        return ctx

    def aggregator(self) -> ssl.SSLContext:
        return self.ctx(pki.issue(self.front_proxy_ca, "front-proxy-client", client=True))

    def aggregate_through_sim(self, group: str) -> None:
        """Route `group` through KubeSim's aggregation layer to the adapter, as an APIService with
        caBundle = the serving CA does: TLS, the front-proxy client certificate, X-Remote-User."""
        proxy = pki.issue(self.front_proxy_ca, "front-proxy-client", client=True)
        crt, key = self.tmp / f"proxy-{group}.crt", self.tmp / f"proxy-{group}.key"
        pki.write_pair(proxy, crt, key)
        self.sim.set_aggregated_api(group, self.url, verify=str(self.tmp / "server-ca.crt"), cert=(str(crt), str(key)))

    def get(self, path: str, ctx: ssl.SSLContext, headers=None) -> httpx.Response:
        with httpx.Client(verify=ctx, timeout=15) as c:
            return c.get(self.url + path, headers=headers)

    def stop(self) -> None:
        self.adapter.stop()


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[Env]:
    from kubesim.apiserver import KubeSim

    tmp = tmp_path_factory.mktemp("adapter-secure")
    with start_backfilled(_openmetrics(int(time.time()))) as prom, KubeSim() as sim:
        for pod in ("web-1", "web-2"):
            sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod, "namespace": "web", "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "app", "image": "web"}]}})
        sim.allow(HPA, "get", "custom.metrics.k8s.io", "pods/http_requests")
        for path in ("/apis", "/apis/custom.metrics.k8s.io", "/apis/custom.metrics.k8s.io/v1beta2", "/openapi/v2"):
            sim.allow("system:authenticated", "get", "", path)
        sim.allow("monitoring", "get", "", "/metrics")
        e = Env(tmp, sim, prom.url)
        try:
            e.wait_ready()
            yield e
        finally:
            e.stop()


def _as(user: str, *groups: str) -> list[tuple[str, str]]:
    return [("X-Remote-User", user), *[("X-Remote-Group", g) for g in groups]]


def test_hpa_through_the_aggregator(env: Env) -> None:
    r = env.get(METRIC, env.aggregator(), _as(HPA, "system:serviceaccounts", "system:serviceaccounts:kube-system"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["kind"] == "MetricValueList"
    assert sorted(i["describedObject"]["name"] for i in body["items"]) == ["web-1", "web-2"]


def test_spoofed_headers_without_the_aggregator_cert(env: Env) -> None:
    r = env.get(METRIC, env.ctx(), _as(HPA, "system:masters"))
    assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"


@pytest.mark.parametrize("which", ["other CA", "expired", "CN not allowed"])
def test_untrusted_proxy_certs(env: Env, which: str) -> None:
    if which == "other CA":
        cert = pki.issue(pki.new_ca("other"), "front-proxy-client", client=True)
    elif which == "expired":
        cert = pki.issue(env.front_proxy_ca, "front-proxy-client", client=True, days=1,
                         not_before=dt.datetime.now(dt.UTC) - dt.timedelta(days=5))
    else:
        cert = pki.issue(env.front_proxy_ca, "someone-else", client=True)
    try:
        r = env.get(METRIC, env.ctx(cert), _as(HPA, "system:masters"))
    except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
        assert which != "CN not allowed"  # refused in the handshake
        return
    assert which == "CN not allowed" and r.status_code == 401


def test_forbidden_names_user_verb_resource(env: Env) -> None:
    r = env.get(METRIC, env.aggregator(), _as("bob", "devs"))
    assert r.status_code == 403
    assert r.json()["message"].startswith(
        'pods.custom.metrics.k8s.io "*" is forbidden: User "bob" cannot get resource "pods/http_requests" '
        'in API group "custom.metrics.k8s.io" in the namespace "web"')


def test_aggregator_discovery_and_openapi(env: Env) -> None:
    for path in ("/apis", "/apis/custom.metrics.k8s.io", "/apis/custom.metrics.k8s.io/v1beta2", "/openapi/v2"):
        r = env.get(path, env.aggregator(), _as("system:kube-aggregator"))
        assert r.status_code == 200, (path, r.text)


def test_bearer_token(env: Env) -> None:
    env.sim.tokens["hpa-token"] = {"username": HPA, "groups": ["system:serviceaccounts"]}
    r = env.get(METRIC, env.ctx(), {"Authorization": "Bearer hpa-token"})
    assert r.status_code == 200, r.text
    assert env.get(METRIC, env.ctx(), {"Authorization": "Bearer nope"}).status_code == 401


def test_probes_without_credentials(env: Env) -> None:
    assert env.get("/livez", env.ctx()).status_code == 200
    assert env.get("/readyz", env.ctx()).status_code == 200
    assert env.get("/metrics", env.ctx()).status_code == 401


def test_review_api_down_is_503(env: Env) -> None:
    env.sim.fail_auth_reviews = True
    try:
        r = env.get(METRIC, env.aggregator(), _as("carol"))
    finally:
        env.sim.fail_auth_reviews = False
    assert r.status_code == 503 and r.json()["reason"] == "ServiceUnavailable"


def test_security_counters_on_the_adapters_metrics(env: Env) -> None:
    env.get("/apis", env.ctx(), _as("spoof"))  # at least one failure
    r = env.get("/metrics", env.aggregator(), _as("monitoring"))
    assert r.status_code == 200
    assert 'promscaler_adapter_authentication_attempts_total{authenticator="none",result="failure"}' in r.text
    assert 'promscaler_adapter_authorization_decisions_total{decision="allowed",source="review"}' in r.text
    assert "promscaler_adapter_requests_total" in r.text  # the adapter's own registry


def test_through_kubesims_aggregation_layer(env: Env) -> None:
    """Client -> KubeSim (authenticates the bearer token) -> adapter over TLS with the front-proxy
    certificate and X-Remote-User, as an APIService with caBundle = the serving CA."""
    env.aggregate_through_sim("custom.metrics.k8s.io")
    env.sim.tokens["hpa-sa-token"] = {"username": HPA, "groups": []}
    env.sim.tokens["dan-token"] = {"username": "dan", "groups": []}
    try:
        r = httpx.get(env.sim.url + METRIC, headers={"Authorization": "Bearer hpa-sa-token"}, timeout=15)
        assert r.status_code == 200, r.text
        assert r.json()["kind"] == "MetricValueList" and len(r.json()["items"]) == 2
        r = httpx.get(env.sim.url + METRIC, headers={"Authorization": "Bearer dan-token"}, timeout=15)
        assert r.status_code == 403 and 'User "dan" cannot get resource "pods/http_requests"' in r.json()["message"]
    finally:
        env.sim.set_aggregated_api("custom.metrics.k8s.io", None)


def _tls12_exchange(env: Env, request: bytes) -> tuple[bytes, list[int]]:
    """`request` over TLS 1.2 (its record types travel in the clear), read until the answer's
    Content-Length is in: (the answer, the type of each TLS record that brought it)."""
    ctx = env.aggregator()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with socket.create_connection(("127.0.0.1", env.port), timeout=15) as sock:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536))
        sock.sendall(outgoing.read())
        tls.write(request)
        sock.sendall(outgoing.read())
        raw, answer = b"", b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
                answer.lower().partition(b"content-length: ")[2].split(b"\r\n")[0] or b"0"):
            data = sock.recv(65536)
            assert data, f"connection closed after {answer!r}"
            raw += data
            incoming.write(data)
            try:
                while True:
                    answer += tls.read(65536)
            except ssl.SSLWantReadError:
                pass
    types, at = [], 0
    while at < len(raw):  # each record: type (1 byte), version (2), length (2), body
        types.append(raw[at])
        at += 5 + int.from_bytes(raw[at + 3:at + 5], "big")
    return answer, types


def test_an_answer_leaves_in_one_tls_record(env: Env) -> None:
    """The status line, headers and body of a small answer go out in one write: one TLS record,
    one `send`, one wake-up of the client (uvicorn writes the headers and the body apart)."""
    path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests"
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Remote-User: {HPA}\r\n"
               "X-Remote-Group: system:serviceaccounts\r\n\r\n").encode()
    answer, records = _tls12_exchange(env, request)
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"MetricValueList"' in answer, answer
    assert records == [23]  # one application-data record


def test_serving_cert_rotation(env: Env) -> None:
    """Runs last in this module: the rotated certificate is signed by a CA the clients also trust."""
    rotated = pki.issue(env.server_ca, "adapter-rotated", dns=["localhost"], ips=["127.0.0.1"], server=True)
    with httpx.Client(verify=env.ctx(), timeout=10) as kept:
        assert kept.get(env.url + "/livez").status_code == 200
        pki.write_pair(rotated, env.tmp / "tls.crt", env.tmp / "tls.key")
        deadline = time.monotonic() + 10
        seen = None
        while time.monotonic() < deadline:
            with (socket.create_connection(("127.0.0.1", env.port)) as raw,
                  env.ctx().wrap_socket(raw, server_hostname="127.0.0.1") as s):
                seen = s.getpeercert(binary_form=True)
            if seen == rotated.cert.public_bytes(Encoding.DER):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the adapter kept serving the old certificate")
        assert kept.get(env.url + "/livez").status_code == 200  # the old connection was not dropped


def test_probes_withhold_backend_detail_from_the_unauthorized(tmp_path, sim_for_probes) -> None:
    with socket.socket() as s:  # a port nothing listens on: Prometheus is unreachable
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    e = Env(tmp_path, sim_for_probes, dead)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                r = e.get("/readyz", e.ctx())
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, e.adapter.stderr()
                time.sleep(0.1)
        assert r.status_code == 503 and "reason withheld" in r.text and "readyz check failed" in r.text
        sim_for_probes.tokens["probe-reader"] = {"username": "probe-reader", "groups": []}
        sim_for_probes.tokens["nobody"] = {"username": "nobody", "groups": []}
        sim_for_probes.allow("probe-reader", "get", "", "/readyz")
        for who, headers in (("anonymous", None), ("unauthorized", {"Authorization": "Bearer nobody"}),
                             ("bad token", {"Authorization": "Bearer nope"})):
            r = e.get("/readyz?verbose", e.ctx(), headers)
            assert r.status_code == 503 and "reason withheld" in r.text, who
            assert dead not in r.text and "seriesQuery" not in r.text and "127.0.0.1" not in r.text, who
        r = e.get("/readyz?verbose", e.ctx(), {"Authorization": "Bearer probe-reader"})
        assert r.status_code == 503 and "reason withheld" not in r.text and "discovery has not succeeded" in r.text
        assert e.get("/livez", e.ctx()).text == "ok"
        assert "discovery has not succeeded" in e.adapter.stderr()  # the operator's copy
    finally:
        e.stop()


@pytest.fixture
def sim_for_probes():
    from kubesim.apiserver import KubeSim

    with KubeSim() as sim:
        yield sim
