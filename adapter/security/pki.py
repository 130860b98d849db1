"""Certificates with `cryptography`: CAs, serving and client certificates, PEM I/O.

Used for the self-signed serving pair in `--cert-dir` (as kube-apiserver makes it), by the
`apiservice.certs` command and by tests. No openssl binary involved.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "KeyPair",
    "cert_pem",
    "issue",
    "key_pem",
    "load_pem_certs",
    "new_ca",
    "self_signed_serving",
    "write_pair",
    "write_self_signed",
]


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def cert_pem(self) -> bytes:
        return cert_pem(self.cert)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    if cn:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _builder(subject: x509.Name, issuer: KeyPair | None, key: ec.EllipticCurvePrivateKey, start: dt.datetime,
             days: float, ca: bool) -> x509.CertificateBuilder:
    """What every certificate here has: validity, basic constraints, key usage and key identifiers
    (self-signed when `issuer` is None)."""
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=ca, crl_sign=ca, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()), critical=False)
    return builder


def new_ca(cn: str, days: int = 3650, not_before: dt.datetime | None = None, parent: KeyPair | None = None) -> KeyPair:
    """A CA certificate (P-256 key): self-signed, or an intermediate signed by `parent`."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or _now() - dt.timedelta(minutes=5)
    builder = _builder(_name(cn), parent, key, start, days, ca=True)
    return KeyPair(builder.sign(parent.key if parent else key, hashes.SHA256()), key)


def issue(
    ca: KeyPair,
    cn: str,
    *,
    orgs: tuple[str, ...] | list[str] = (),
    dns: tuple[str, ...] | list[str] = (),
    ips: tuple[str, ...] | list[str] = (),
    server: bool = False,
    client: bool = False,
    days: float = 365,
    not_before: dt.datetime | None = None,
) -> KeyPair:
    """A leaf certificate signed by `ca` for serving (`server`) and/or client auth (`client`)."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or _now() - dt.timedelta(minutes=5)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    builder = _builder(_name(cn, tuple(orgs)), ca, key, start, days, ca=False)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def self_signed_serving(
    host: str, alternate_dns: list[str] | None = None, alternate_ips: list[str] | None = None
) -> tuple[KeyPair, KeyPair]:
    """A CA plus a serving cert for `host`, as client-go's GenerateSelfSignedCertKey makes them.

    Returns (ca, serving); the serving cert file holds serving + CA, like kube-apiserver's.
    """
    ca = new_ca(f"{host}-ca@{int(_now().timestamp())}", days=365)
    ips = ["127.0.0.1", *(alternate_ips or [])]
    dns = [host, "localhost", *(alternate_dns or [])]
    try:
        ipaddress.ip_address(host)
        ips.insert(0, host)
    except ValueError:
        pass
    serving = issue(ca, f"{host}@{int(_now().timestamp())}", dns=list(dict.fromkeys(dns)),
                    ips=list(dict.fromkeys(ips)), server=True, days=365)
    return ca, serving


def write_pair(pair: KeyPair, cert_path: Path, key_path: Path, chain: Sequence[x509.Certificate] = ()) -> None:
    """Write cert (+ chain) and key atomically (rename), the key readable by the owner only."""
    for path, data, mode in (
        (cert_path, pair.cert_pem + b"".join(cert_pem(c) for c in chain), 0o644),
        (key_path, pair.key_pem, 0o600),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)


def write_self_signed(directory: Path, host: str = "127.0.0.1") -> tuple[KeyPair, Path, Path, Path]:
    """`self_signed_serving(host)` written to `directory` for a server and its clients:
    (the CA, ca.crt, tls.crt, tls.key)."""
    ca, serving = self_signed_serving(host)
    ca_file, cert, key = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    write_pair(serving, cert, key)
    ca_file.write_bytes(ca.cert_pem)
    return ca, ca_file, cert, key


def load_pem_certs(data: bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle (empty list for empty input)."""
    if not data.strip():
        return []
    return x509.load_pem_x509_certificates(data)
