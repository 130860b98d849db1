"""Render charts/promscaler with each values file here and validate every object.

Needs Go and sprig (Debian: `apt-get install golang-go golang-github-masterminds-sprig-dev
golang-gopkg-yaml.v2-dev`); not part of the test suite because Helm/Go are not project
dependencies. Checks: every object validates against the Kubernetes 1.36 schema (cert-manager
objects excepted), the adapter's args parse with the adapter's own flag parser, the rules
ConfigMap parses, and with self-signed TLS the caBundle verifies the served certificate.

    python charts/render-check/check.py
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import kubernetes_validate
import yaml
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from adapter.rules import parse_rules  # noqa: E402
from adapter.settings import parse_settings  # noqa: E402


def build() -> Path:
    out = Path(tempfile.mkdtemp()) / "render"
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode",
           "GOCACHE": str(out.parent / "gocache")}
    subprocess.run(["go", "build", "-o", str(out), str(HERE / "main.go")], check=True, env=env)
    return out


def check(render: Path, values: Path) -> None:
    r = subprocess.run([str(render), str(ROOT / "charts" / "promscaler"), str(values), "promscaler"],
                       capture_output=True, text=True, check=True)
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    for d in docs:
        if not d["apiVersion"].startswith("cert-manager.io/"):
            kubernetes_validate.validate(d, "1.36", strict=True)
    dep = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-adapter"))
    parse_settings(dep["spec"]["template"]["spec"]["containers"][0]["args"])
    for cm in (d for d in docs if d["kind"] == "ConfigMap"):
        parse_rules(cm["data"]["config.yaml"])
    secret = next((d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-adapter-tls")), None)
    if secret:
        api = next(d for d in docs if d["kind"] == "APIService")
        ca = x509.load_pem_x509_certificate(base64.b64decode(api["spec"]["caBundle"]))
        leaf = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        svc = api["spec"]["service"]
        name = x509.DNSName(f"{svc['name']}.{svc['namespace']}.svc")
        PolicyBuilder().store(Store([ca])).build_server_verifier(name).verify(leaf, [])
    print(f"{values.name}: {len(docs)} objects OK ({', '.join(sorted({d['kind'] for d in docs}))})")


if __name__ == "__main__":
    binary = build()
    for v in sorted((HERE / "values").glob("*.yaml")):
        check(binary, v)
