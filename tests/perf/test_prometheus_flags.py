"""prometheus-adapter's Prometheus flags behave as there: `--prometheus-auth-incluster` uses the
pod's service-account token and CA; a `--prometheus-url` without a scheme is a one-line start-up
error."""

from __future__ import annotations

import ssl
import subprocess
import sys

from adapter.prometheus import PrometheusClient
from adapter.security import pki
from adapter.settings import parse_settings
from kubesim.processes import ROOT

from .test_backends import TOKEN, _serve_proxy, _TokenProxy


def test_url_without_scheme_is_a_one_line_startup_error(rules_file):
    out = subprocess.run([sys.executable, "-m", "adapter", "--insecure", "--port", "1", "--config", str(rules_file),
                          "--prometheus-url", "127.0.0.1:9090"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--prometheus-url" in lines[0] and "http://127.0.0.1:9090" in lines[0], out.stderr


async def test_auth_incluster_uses_the_service_account_token_and_ca(prometheus, tmp_path):
    """Prometheus behind TLS with a private CA and a bearer-token check, as an in-cluster
    kube-rbac-proxy would be: the service account's ca.crt verifies it, its token passes."""
    ca, _, cert, key = pki.write_self_signed(tmp_path)
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "ca.crt").write_bytes(ca.cert_pem)
    (sa / "token").write_text(TOKEN)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = _serve_proxy(prometheus.url, tls)
    url = f"https://127.0.0.1:{server.server_port}"
    try:
        settings = parse_settings(["--prometheus-url", url, "--prometheus-auth-incluster"], service_account_dir=sa)
        assert settings.prometheus_token_file == str(sa / "token")
        assert settings.prometheus_ca_file == str(sa / "ca.crt")
        client = PrometheusClient(settings)
        try:
            samples = await client.query('count(up) or vector(1)')
        finally:
            await client.aclose()
        assert len(samples) == 1
        assert _TokenProxy.seen and all(s["auth"] == f"Bearer {TOKEN}" for s in _TokenProxy.seen)

        without = PrometheusClient(parse_settings(["--prometheus-url", url]))  # no token, system CAs
        try:
            assert not await without.ready()
        finally:
            await without.aclose()
    finally:
        server.shutdown()
        server.server_close()
