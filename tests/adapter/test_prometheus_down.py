"""Prometheus unreachable, hanging, and back: 503 Status and failing /readyz, then recovery.
Uses its own Prometheus (stopped, frozen and restarted on the same port)."""

from __future__ import annotations

import os
import signal

from kubesim.net import free_port
from kubesim.prometheus import PrometheusServer, backfill
from tests.support import wait_for

from .conftest import RULES, AdapterProcess, approx, data, run_adapter

VALUE = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1/namespaces/web/queue_messages_ready"


def unavailable(resp) -> bool:
    body = resp.json()
    return resp.status_code == 503 and body["kind"] == "Status" and body["reason"] == "ServiceUnavailable"


def test_fail_on_prometheus_unavailable_exits_with_one_line():
    out = run_adapter("--insecure", "--port", str(free_port()), "--prometheus-url", f"http://127.0.0.1:{free_port()}",
                      "--config", str(RULES), "--fail-on-prometheus-unavailable", "--prometheus-timeout", "2s")
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("promscaler-adapter: Prometheus is unavailable") and "unreachable" in last
    assert "Traceback" not in out.stderr


def test_down_at_start_then_up_then_frozen_then_down_then_back():
    prom = PrometheusServer(port=free_port())
    backfill(data.openmetrics(), prom.data_dir)
    # --request-timeout caps the Prometheus timeout: every wait below is bounded by 1s
    adapter = AdapterProcess("--prometheus-url", prom.url, "--config", str(RULES), "--prometheus-timeout", "10s",
                             "--request-timeout", "1s", "--query-cache-ttl", "0", "--metrics-relist-interval", "30s")
    try:
        # 1. Prometheus absent at start: the adapter serves, but is not ready and says why
        adapter.wait_listening()
        ready = adapter.get("/readyz?verbose")  # insecure serving: anyone may see the detail
        assert ready.status_code == 503 and "discovery has not succeeded" in ready.text
        ready = adapter.get("/readyz")
        assert ready.status_code == 503 and "reason withheld" in ready.text and prom.url not in ready.text
        assert unavailable(adapter.get(VALUE))  # not "404 unknown metric": it could not ask
        assert adapter.get("/healthz").status_code == 200

        # 2. Prometheus arrives: discovery retries on its own, the ready line is printed
        prom.start()
        adapter.wait_ready(timeout=20)
        assert adapter.get("/readyz").status_code == 200
        assert adapter.get(VALUE).status_code == 200

        # 3. Prometheus hangs (SIGSTOP): a 503 within the request timeout, not a hung request
        os.kill(prom.proc.pid, signal.SIGSTOP)
        try:
            resp = adapter.get(EXTERNAL)
            assert unavailable(resp) and "did not answer within 1s" in resp.json()["message"]
        finally:
            os.kill(prom.proc.pid, signal.SIGCONT)

        # 4. Prometheus stopped: 503 Status and /readyz failing; discovery documents stay served
        prom.stop()
        assert unavailable(adapter.get(VALUE))
        assert wait_for(lambda: adapter.get("/readyz").status_code == 503)
        assert "unreachable" in adapter.get("/readyz?verbose").text
        listed = adapter.get("/apis/custom.metrics.k8s.io/v1beta2").json()["resources"]
        assert any(r["name"] == "pods/http_requests" for r in listed)

        # 5. Prometheus back on the same port: values and readiness recover
        prom.start()
        assert wait_for(lambda: adapter.get("/readyz").status_code == 200)
        resp = adapter.get(VALUE)
        assert resp.status_code == 200 and approx(resp.json()["items"][0]["value"], 1.5)
        assert "Traceback" not in adapter.stderr()
    finally:
        adapter.stop()
        prom.close()
