"""The serving TLS context: versions, cipher suites, client-CA verification, hot reload.

Like the Kubernetes apiserver's dynamic serving: the certificate, key and CA files are polled,
and when they change a fresh `SSLContext` is built and handed to new handshakes through the SNI
callback of the context the listener was created with. Open connections keep their session.
The TLS layer only *requests* client certificates (CERT_OPTIONAL against the union of the client
and request-header CAs); which CA a certificate chains to, and so what it proves, is decided per
request by `authn`, against the CA bundles as they are now.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import Criticality, ExtensionPolicy, PolicyBuilder, Store, VerificationError

from adapter.security import pki

__all__ = [
    "CIPHER_SUITES",
    "TLS_VERSIONS",
    "CABundle",
    "CertError",
    "ServingTLS",
    "ensure_self_signed",
    "openssl_ciphers",
    "parse_min_version",
]

log = logging.getLogger("adapter.security.tls")

TLS_VERSIONS = {
    "VersionTLS12": ssl.TLSVersion.TLSv1_2,
    "VersionTLS13": ssl.TLSVersion.TLSv1_3,
}
_OLD_VERSIONS = {"VersionTLS10", "VersionTLS11"}

# Go / IANA cipher suite names (as `--tls-cipher-suites` takes them) -> OpenSSL names.
CIPHER_SUITES: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
}
# TLS 1.3 suites are accepted (Go accepts them) but, as in Go, not configurable.
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


class CertError(ValueError):
    """A certificate, key or CA file that cannot be used; the message names the file."""


def parse_min_version(value: str | None) -> ssl.TLSVersion:
    """`--tls-min-version`: VersionTLS12 (default) or VersionTLS13; 1.0/1.1 are refused."""
    if not value:
        return ssl.TLSVersion.TLSv1_2
    if value in _OLD_VERSIONS:
        raise ValueError(f"--tls-min-version: {value} is not supported, use VersionTLS12 or VersionTLS13")
    try:
        return TLS_VERSIONS[value]
    except KeyError:
        raise ValueError(
            f"--tls-min-version: unknown version {value!r}, use one of {', '.join(TLS_VERSIONS)}"
        ) from None


def openssl_ciphers(suites: list[str] | None) -> str | None:
    """`--tls-cipher-suites` (Go names) as an OpenSSL cipher string; None = library defaults."""
    if not suites:
        return None
    names = []
    for suite in suites:
        suite = suite.strip()
        if suite in TLS13_SUITES:
            continue
        try:
            names.append(CIPHER_SUITES[suite])
        except KeyError:
            raise ValueError(f"--tls-cipher-suites: unknown cipher suite {suite!r}") from None
    return ":".join(dict.fromkeys(names)) or None


def _stat(path: Path | None) -> tuple[int, int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _must_be_ca(_policy: object, _cert: x509.Certificate, ext: x509.BasicConstraints | None) -> None:
    if ext is None or not ext.ca:
        raise ValueError("an issuer's basicConstraints must say CA:TRUE")


def _may_sign_certs(_policy: object, _cert: x509.Certificate, ext: x509.KeyUsage | None) -> None:
    if ext is not None and not ext.key_cert_sign:
        raise ValueError("an issuer's keyUsage, when present, must include keyCertSign")


# What Go's crypto/x509 (kube-apiserver's client-certificate check) asks of an issuer: basic
# constraints CA:TRUE, and keyCertSign *if* a keyUsage is present. Not the Web PKI's rules (a
# keyUsage, key identifiers...): a CA made by a plain `openssl req -x509` has no keyUsage.
_GO_CA_POLICY = (
    ExtensionPolicy.permit_all()
    .require_present(x509.BasicConstraints, Criticality.AGNOSTIC, _must_be_ca)
    .may_be_present(x509.KeyUsage, Criticality.AGNOSTIC, _may_sign_certs)
)


class CABundle:
    """A set of CA certificates from a file (re-read on change) or from PEM set by a watcher.

    `verify_client` checks a client chain against it exactly as Go's x509 verification does for
    the apiserver's client-certificate authenticators: chain to a root here, valid now, and an
    extended key usage that allows client auth (or none).
    """

    def __init__(self, name: str, path: str | Path | None = None, pem: bytes = b"") -> None:
        self.name = name
        self.path = Path(path) if path else None
        self._stat: tuple[int, int, int] | None = None
        self.pem = b""
        self.certs: list[x509.Certificate] = []
        self._store: Store | None = None
        # chains that verified, until the earliest expiry in them (at most a minute): the verifier
        # costs ~0.25 ms, once per request otherwise; cleared when the bundle changes
        self._verified: dict[tuple[x509.Certificate, ...], tuple[x509.Certificate, dt.datetime]] = {}
        if self.path is not None:
            self.refresh(strict=True)
        elif pem:
            self.set_pem(pem)

    def __bool__(self) -> bool:
        return bool(self.certs)

    def set_pem(self, pem: bytes) -> bool:
        """Replace the bundle; True when it changed. Bad PEM raises CertError and keeps the old one."""
        if pem == self.pem:
            return False
        try:
            certs = pki.load_pem_certs(pem)
        except ValueError as exc:
            raise CertError(f"{self.name}: cannot parse CA bundle: {exc}") from None
        self.pem, self.certs = pem, certs
        self._store = Store(certs) if certs else None
        self._verified = {}
        return True

    def refresh(self, strict: bool = False) -> bool:
        """Re-read the file if it changed on disk; True when the bundle changed."""
        if self.path is None:
            return False
        st = _stat(self.path)
        if st == self._stat and not strict:
            return False
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            if strict:
                raise CertError(f"{self.name}: cannot read {self.path}: {exc.strerror}") from None
            return False
        self._stat = st
        return self.set_pem(data)

    def verify_client(self, chain: list[x509.Certificate], now: dt.datetime | None = None) -> x509.Certificate:
        """The leaf of `chain` if it verifies against this bundle for client auth, else raise."""
        if self._store is None or not chain:
            raise VerificationError("no CA or no client certificate")
        if now is not None:  # a given time: verified afresh
            return self._verify_client(chain, now)
        now = dt.datetime.now(dt.UTC)
        key = tuple(chain)
        hit = self._verified.get(key)
        if hit is not None and now < hit[1]:
            return hit[0]
        leaf = self._verify_client(chain, now)
        if len(self._verified) >= 1024:
            self._verified.clear()
        until = min([now + dt.timedelta(minutes=1), *(c.not_valid_after_utc for c in chain)])
        self._verified[key] = (leaf, until)
        return leaf

    def _verify_client(self, chain: list[x509.Certificate], now: dt.datetime) -> x509.Certificate:
        leaf = chain[0]
        if leaf.version is x509.Version.v1:  # no extensions: no EKU, valid for any use (Go accepts it)
            return self._verify_v1(leaf, chain[1:], now)
        self._verify_chain(leaf, chain[1:], now)
        try:
            eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            return leaf
        if ExtendedKeyUsageOID.CLIENT_AUTH in eku or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in eku:
            return leaf
        raise VerificationError("certificate is not valid for client authentication")

    def _verify_chain(self, leaf: x509.Certificate, intermediates: list[x509.Certificate], now: dt.datetime) -> None:
        assert self._store is not None
        verifier = (
            PolicyBuilder()
            .store(self._store)
            .time(now)
            .extension_policies(ca_policy=_GO_CA_POLICY, ee_policy=ExtensionPolicy.permit_all())
            .build_client_verifier()
        )
        try:
            verifier.verify(leaf, intermediates)
        except (ValueError, TypeError) as exc:  # unsupported key or signature: not a usable certificate
            raise VerificationError(f"certificate cannot be verified: {exc}") from None

    def _verify_v1(self, leaf: x509.Certificate, intermediates: list[x509.Certificate],
                   now: dt.datetime) -> x509.Certificate:
        """An X.509 v1 leaf (`openssl x509 -req` without an extension file makes one), which the
        `cryptography` verifier refuses outright: its signature by an issuer that is a CA in this
        bundle, or by an intermediate that itself verifies to it; and its validity."""
        if not leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc:
            raise VerificationError("certificate has expired or is not yet valid")
        for issuer in [*self.certs, *intermediates]:
            if issuer.subject != leaf.issuer:
                continue
            try:
                leaf.verify_directly_issued_by(issuer)
                _must_be_ca(None, issuer, _extension(issuer, x509.BasicConstraints))
                _may_sign_certs(None, issuer, _extension(issuer, x509.KeyUsage))
            except (ValueError, TypeError, InvalidSignature):
                continue
            if issuer in self.certs:
                return leaf
            rest = [c for c in intermediates if c is not issuer]
            self._verify_chain(issuer, rest, now)
            return leaf
        raise VerificationError("certificate is not signed by a CA of this bundle")


def _extension(cert: x509.Certificate, kind: type) -> Any:
    try:
        return cert.extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None


def ensure_self_signed(cert_dir: str | Path, host: str = "localhost",
                       alternate_dns: list[str] | None = None) -> tuple[Path, Path]:
    """`--cert-dir` without `--tls-cert-file`: reuse or create apiserver.crt/.key there."""
    cert_dir = Path(cert_dir)
    cert, key = cert_dir / "apiserver.crt", cert_dir / "apiserver.key"
    if cert.exists() and key.exists():
        return cert, key
    try:
        ca, serving = pki.self_signed_serving(host, alternate_dns=alternate_dns)
        pki.write_pair(serving, cert, key, chain=[ca.cert])
    except OSError as exc:
        raise CertError(f"--cert-dir: cannot write a self-signed certificate into {cert_dir}: {exc.strerror}") from None
    log.info("generated self-signed serving certificate %s", cert)
    return cert, key


@dataclass
class ServingTLS:
    """The listener's SSLContext plus everything needed to rebuild it when files change."""

    cert_file: Path
    key_file: Path
    client_cas: list[CABundle] = field(default_factory=list)
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    ciphers: str | None = None
    on_reload: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.cert_file, self.key_file = Path(self.cert_file), Path(self.key_file)
        self._stats = self._file_stats()
        self._current = self._build()
        # The context the listener holds: it forwards each handshake to the newest context.
        self.context = self._build()
        self.context.sni_callback = self._select
        self.reloads = 0
        self.checks = 0  # polls of the files: how a test knows a change had its chance to be seen

    def _file_stats(self) -> tuple:
        return (_stat(self.cert_file), _stat(self.key_file))

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = self.min_version
        if self.ciphers:
            try:
                ctx.set_ciphers(self.ciphers)
            except ssl.SSLError:
                raise ValueError(f"--tls-cipher-suites: none of {self.ciphers} is available in this OpenSSL") from None
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise CertError(
                f"cannot load serving certificate {self.cert_file} / key {self.key_file}: {exc}"
            ) from None
        cadata = "".join(b.pem.decode() for b in self.client_cas if b)
        if cadata:
            ctx.load_verify_locations(cadata=cadata)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def _select(self, sslobj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        current = self._current
        if sslobj.context is not current:
            sslobj.context = current

    def check(self) -> bool:
        """Reload if any file changed; True when a new context is in use. Bad files keep the old one."""
        self.checks += 1
        changed = [b.name for b in self.client_cas if _safe_refresh(b)]
        stats = self._file_stats()
        if stats != self._stats:
            changed.append("serving certificate")
        if not changed:
            return False
        try:
            new = self._build()
        except (CertError, ValueError) as exc:
            log.warning("keeping the previous TLS configuration: %s", exc)
            return False
        self._stats, self._current = stats, new
        self.reloads += 1
        log.info("reloaded TLS: %s changed", ", ".join(changed))
        if self.on_reload:
            self.on_reload(", ".join(changed))
        return True

    def rebuild(self) -> None:
        """Build a fresh context now (a CA bundle changed through `set_pem`)."""
        try:
            self._current = self._build()
            self.reloads += 1
        except (CertError, ValueError) as exc:
            log.warning("keeping the previous TLS configuration: %s", exc)

    async def watch(self, interval: float = 1.0) -> None:
        """Poll the files forever (run as a task; cancel to stop)."""
        while True:
            await asyncio.sleep(interval)
            self.check()


def _safe_refresh(bundle: CABundle) -> bool:
    try:
        return bundle.refresh()
    except CertError as exc:
        log.warning("%s", exc)
        return False
