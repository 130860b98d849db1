"""Make the adapter's serving certificate and put its CA into the APIService objects.

    python -m apiservice.certs --namespace promscaler --service promscaler-adapter --out certs/ \
        [--apiservice-dir apiservice/]
    kubectl apply -f apiservice/ -f certs/secret.yaml

Writes `ca.crt`/`ca.key` (reused on later runs, so the caBundle stays stable across serving
certificate renewals), `tls.crt`/`tls.key` for the Service's DNS names, and `secret.yaml`
(a kubernetes.io/tls Secret). Every APIService in the directory that points at the Service gets
the CA as `caBundle`; the files are edited in place, comments and layout kept.
Uses `cryptography` only (no openssl binary).
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from adapter.security import pki

__all__ = ["dns_names", "make_certs", "patch_ca_bundle", "secret_manifest", "main"]

_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.MULTILINE)
_CA_LINE = re.compile(r"^(?P<indent>[ \t]+)caBundle:.*$", re.MULTILINE)
_SPEC_LINE = re.compile(r"^spec:[ \t]*$", re.MULTILINE)


def dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.{cluster_domain}"]


def _load_ca(out: Path) -> pki.KeyPair | None:
    crt, key = out / "ca.crt", out / "ca.key"
    if not (crt.exists() and key.exists()):
        return None
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    k = serialization.load_pem_private_key(key.read_bytes(), password=None)
    return pki.KeyPair(cert, k)  # type: ignore[arg-type]


def make_certs(namespace: str, service: str, out: Path, days: int = 365, ca_days: int = 3650,
               cluster_domain: str = "cluster.local") -> tuple[pki.KeyPair, pki.KeyPair]:
    """(ca, serving) written to `out`; an existing ca.crt/ca.key there is reused."""
    out.mkdir(parents=True, exist_ok=True)
    ca = _load_ca(out)
    if ca is None:
        ca = pki.new_ca(f"{service}.{namespace} CA", days=ca_days)
        pki.write_pair(ca, out / "ca.crt", out / "ca.key")
    names = dns_names(service, namespace, cluster_domain)
    serving = pki.issue(ca, names[2], dns=names, server=True, days=days)
    pki.write_pair(serving, out / "tls.crt", out / "tls.key")
    return ca, serving


def secret_manifest(name: str, namespace: str, ca: pki.KeyPair, serving: pki.KeyPair) -> dict:
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/name": "promscaler-adapter", "app.kubernetes.io/part-of": "promscaler"}},
        "data": {"tls.crt": b64(serving.cert_pem), "tls.key": b64(serving.key_pem), "ca.crt": b64(ca.cert_pem)},
    }


def patch_ca_bundle(directory: Path, namespace: str, service: str, ca_pem: bytes) -> list[str]:
    """Set caBundle in every APIService under `directory` served by namespace/service; their names."""
    bundle = base64.b64encode(ca_pem).decode()
    patched: list[str] = []
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        text = path.read_text()
        docs = _DOC_SPLIT.split(text)
        seps = _DOC_SPLIT.findall(text)
        changed = False
        for i, doc in enumerate(docs):
            try:
                obj = yaml.safe_load(doc)
            except yaml.YAMLError as exc:
                raise ValueError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
            if not isinstance(obj, dict) or obj.get("kind") != "APIService":
                continue
            svc = (obj.get("spec") or {}).get("service") or {}
            if svc.get("name") != service or svc.get("namespace") != namespace:
                continue
            if _CA_LINE.search(doc):
                doc = _CA_LINE.sub(lambda m: f"{m.group('indent')}caBundle: {bundle}", doc, count=1)
            elif _SPEC_LINE.search(doc):
                doc = _SPEC_LINE.sub(f"spec:\n  caBundle: {bundle}", doc, count=1)
            else:
                raise ValueError(f"{path}: APIService {obj['metadata']['name']} has no block-style spec to patch")
            docs[i] = doc
            patched.append(obj["metadata"]["name"])
            changed = True
        if changed:
            merged = docs[0]
            for sep, doc in zip(seps, docs[1:]):
                merged += sep + doc
            path.write_text(merged)
    return patched


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apiservice.certs", description=__doc__.split("\n\n")[0])
    p.add_argument("--namespace", default="promscaler")
    p.add_argument("--service", default="promscaler-adapter")
    p.add_argument("--secret-name", default="promscaler-adapter-tls")
    p.add_argument("--out", required=True, type=Path, help="directory for ca/tls key pairs and secret.yaml")
    p.add_argument("--apiservice-dir", type=Path, default=Path(__file__).resolve().parent,
                   help="manifests whose APIService caBundle is set (default: this package's directory)")
    p.add_argument("--days", type=int, default=365, help="serving certificate validity")
    p.add_argument("--cluster-domain", default="cluster.local")
    args = p.parse_args(argv)
    try:
        ca, serving = make_certs(args.namespace, args.service, args.out, args.days, cluster_domain=args.cluster_domain)
        secret = secret_manifest(args.secret_name, args.namespace, ca, serving)
        (args.out / "secret.yaml").write_text(
            "# The adapter's serving certificate (contains a private key: do not commit).\n"
            + yaml.safe_dump(secret, sort_keys=False))
        patched = patch_ca_bundle(args.apiservice_dir, args.namespace, args.service, ca.cert_pem)
    except (OSError, ValueError) as exc:
        print(f"apiservice.certs: {exc}", file=sys.stderr)
        return 1
    if not patched:
        print(f"apiservice.certs: no APIService in {args.apiservice_dir} points at service "
              f"{args.namespace}/{args.service}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}/secret.yaml (serving certificate for {dns_names(args.service, args.namespace)[2]}); "
          f"caBundle set in {', '.join(patched)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
