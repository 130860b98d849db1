"""Make the adapter's serving certificate and the APIService objects that trust its CA.

    python -m apiservice.certs --namespace promscaler --service promscaler-adapter --out certs/
    kubectl apply -f apiservice/ -f certs/

Everything goes to `--out` (git-ignored `certs/` by default); nothing under `apiservice/` is
rewritten, so a checkout stays clean and the private keys stay out of the repository. Writes
`ca.crt`/`ca.key` (reused on later runs, so the caBundle stays stable across serving certificate
renewals), `tls.crt`/`tls.key` for the Service's DNS names, `secret.yaml` (a kubernetes.io/tls
Secret) and `apiservices.yaml`: every APIService of `--apiservice-dir` that points at the Service,
with the CA as `caBundle`, comments and layout kept. Applied after `apiservice/`, it wins.
Uses `cryptography` only (no openssl binary).
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from collections.abc import Collection
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from adapter.security import pki

__all__ = ["apiservices_with_ca", "dns_names", "main", "make_certs", "secret_manifest"]

_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.MULTILINE)
_CA_LINE = re.compile(r"^(?P<indent>[ \t]+)caBundle:.*$", re.MULTILINE)
_SPEC_LINE = re.compile(r"^spec:[ \t]*$", re.MULTILINE)


def dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    svc = f"{service}.{namespace}.svc"
    return [service, f"{service}.{namespace}", svc, f"{svc}.{cluster_domain}"]


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
                     "labels": {"app.kubernetes.io/name": "promscaler-adapter",
                                "app.kubernetes.io/part-of": "promscaler"}},
        "data": {"tls.crt": b64(serving.cert_pem), "tls.key": b64(serving.key_pem), "ca.crt": b64(ca.cert_pem)},
    }


def apiservices_with_ca(directory: Path, namespace: str, service: str, ca_pem: bytes,
                        skip: Collection[str] = ()) -> tuple[list[str], str]:
    """The APIServices under `directory` served by namespace/service, caBundle set: (names, YAML
    text); those named in `skip` are left out (v1.metrics.k8s.io on a cluster before 1.37), and a
    name in `skip` that is not one of them is a ValueError."""
    bundle = base64.b64encode(ca_pem).decode()
    names: list[str] = []
    skipped: set[str] = set()
    out: list[str] = []
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        for doc in _DOC_SPLIT.split(path.read_text()):
            try:
                obj = yaml.safe_load(doc)
            except yaml.YAMLError as exc:
                raise ValueError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
            if not isinstance(obj, dict) or obj.get("kind") != "APIService":
                continue
            svc = (obj.get("spec") or {}).get("service") or {}
            if svc.get("name") != service or svc.get("namespace") != namespace:
                continue
            if (obj.get("metadata") or {}).get("name") in skip:
                skipped.add(obj["metadata"]["name"])
                continue
            if _CA_LINE.search(doc):
                doc = _CA_LINE.sub(lambda m: f"{m.group('indent')}caBundle: {bundle}", doc, count=1)
            elif _SPEC_LINE.search(doc):
                doc = _SPEC_LINE.sub(f"spec:\n  caBundle: {bundle}", doc, count=1)
            else:
                raise ValueError(f"{path}: APIService {obj['metadata']['name']} has no block-style spec to patch")
            out.append(doc.strip("\n") + "\n")
            names.append(obj["metadata"]["name"])
    if unknown := set(skip) - skipped:
        raise ValueError(f"--skip-apiservice: no APIService {', '.join(sorted(unknown))} in {directory} points at "
                         f"service {namespace}/{service}")
    return names, "---\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m apiservice.certs", description=__doc__.split("\n\n")[0])
    p.add_argument("--namespace", default="promscaler")
    p.add_argument("--service", default="promscaler-adapter")
    p.add_argument("--secret-name", default="promscaler-adapter-tls")
    p.add_argument("--out", type=Path, default=Path("certs"),
                   help="output directory: key pairs, secret.yaml, apiservices.yaml (default: certs)")
    p.add_argument("--apiservice-dir", type=Path, default=Path(__file__).resolve().parent,
                   help="manifests to read the APIServices from; never written (default: this package's directory)")
    p.add_argument("--skip-apiservice", action="append", default=[], metavar="NAME",
                   help="leave this APIService out of apiservices.yaml (repeatable), e.g. v1.metrics.k8s.io "
                        "on a cluster before Kubernetes 1.37")
    p.add_argument("--days", type=int, default=365, help="serving certificate validity")
    p.add_argument("--cluster-domain", default="cluster.local")
    args = p.parse_args(argv)
    try:
        ca, serving = make_certs(args.namespace, args.service, args.out, args.days, cluster_domain=args.cluster_domain)
        secret = secret_manifest(args.secret_name, args.namespace, ca, serving)
        (args.out / "secret.yaml").write_text(
            "# The adapter's serving certificate (contains a private key: do not commit).\n"
            + yaml.safe_dump(secret, sort_keys=False))
        names, text = apiservices_with_ca(args.apiservice_dir, args.namespace, args.service, ca.cert_pem,
                                          args.skip_apiservice)
        if not names:
            print(f"apiservice.certs: no APIService in {args.apiservice_dir} points at service "
                  f"{args.namespace}/{args.service}", file=sys.stderr)
            return 1
        (args.out / "apiservices.yaml").write_text(
            "# The APIService objects with the adapter's CA as caBundle: apply after apiservice/.\n" + text)
    except (OSError, ValueError) as exc:
        print(f"apiservice.certs: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}/secret.yaml (serving certificate for {dns_names(args.service, args.namespace)[2]}) "
          f"and {args.out}/apiservices.yaml (caBundle set in {', '.join(names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
