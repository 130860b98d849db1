"""Client certificates are verified as kube-apiserver verifies them (Go's crypto/x509): a chain to
the configured CA, validity, and an extended key usage allowing client auth (or any, or none).
Go asks no keyUsage of the CA and no key identifiers; certificates below are built with and
without those extensions (with `cryptography`, and with the `openssl` CLI)."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import VerificationError

from adapter.security import pki
from adapter.security.tls import CABundle

from .conftest import PKI, get, serve, settings

NOW = dt.datetime.now(dt.UTC)
SIGN = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                     key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                     decipher_only=False)
NO_SIGN = x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False, content_commitment=False,
                        key_encipherment=True, data_encipherment=False, key_agreement=False, encipher_only=False,
                        decipher_only=False)


def _cert(cn: str, key, issuer: tuple[x509.Certificate, object] | None = None, *, ca: bool | None = None,
          usage: x509.KeyUsage | None = None, ski: bool = False, aki: bool = False,
          eku: list | None = None, days: int = 30, start: dt.datetime = NOW - dt.timedelta(minutes=5)):
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    issuer_cert, issuer_key = issuer if issuer else (None, key)
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(issuer_cert.subject if issuer_cert else name).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(start)
         .not_valid_after(start + dt.timedelta(days=days)))
    if ca is not None:
        b = b.add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    if usage is not None:
        b = b.add_extension(usage, critical=True)
    if ski:
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    if aki and issuer_cert is not None:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_cert.public_key()),
                            critical=False)
    if eku is not None:
        b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _verify(ca_kwargs: dict, leaf_kwargs: dict) -> x509.Certificate:
    ca_key, leaf_key = _key(), _key()
    ca = _cert("ca", ca_key, **ca_kwargs)
    leaf = _cert("alice", leaf_key, (ca, ca_key), **leaf_kwargs)
    return CABundle("client CA", pem=pki.cert_pem(ca)).verify_client([leaf])


FULL_CA = {"ca": True, "usage": SIGN, "ski": True}
CLIENT = [ExtendedKeyUsageOID.CLIENT_AUTH]


@pytest.mark.parametrize("ca_kwargs, leaf_kwargs", [
    (FULL_CA, {"aki": True, "eku": CLIENT}),
    ({"ca": True}, {"eku": CLIENT}),                        # CA without keyUsage nor SKI; leaf without AKI
    ({"ca": True, "ski": True}, {"aki": True}),             # leaf without EKU: any use, as in Go
    (FULL_CA, {"eku": [ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE]}),
    (FULL_CA, {"eku": [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]}),
    (FULL_CA, {"ca": False, "usage": NO_SIGN, "eku": CLIENT}),  # a leaf's own extensions, Go-accepted
])
def test_chains_go_accepts(ca_kwargs, leaf_kwargs):
    assert _verify(ca_kwargs, leaf_kwargs).subject.rfc4514_string() == "CN=alice"


@pytest.mark.parametrize("ca_kwargs, leaf_kwargs", [
    (FULL_CA, {"eku": [ExtendedKeyUsageOID.SERVER_AUTH]}),     # not for client auth
    ({"ca": True, "usage": NO_SIGN}, {"eku": CLIENT}),          # a keyUsage without keyCertSign
    ({"ca": False}, {"eku": CLIENT}),                           # not a CA
    ({}, {"eku": CLIENT}),                                      # a v3 issuer without basicConstraints
    (FULL_CA, {"eku": CLIENT, "days": 1, "start": NOW - dt.timedelta(days=3)}),  # expired
    (FULL_CA, {"eku": CLIENT, "start": NOW + dt.timedelta(days=1)}),              # not yet valid
])
def test_chains_go_rejects(ca_kwargs, leaf_kwargs):
    with pytest.raises(VerificationError):
        _verify(ca_kwargs, leaf_kwargs)


def test_another_ca_is_rejected():
    ca_key, other_key = _key(), _key()
    ca, other = _cert("ca", ca_key, ca=True), _cert("ca", other_key, ca=True)  # same name, other key
    leaf = _cert("alice", _key(), (other, other_key), eku=CLIENT)
    with pytest.raises(VerificationError):
        CABundle("client CA", pem=pki.cert_pem(ca)).verify_client([leaf])


def test_a_verified_chain_is_forgotten_when_the_ca_changes():
    """Verified chains are remembered (verification costs ~0.25 ms per request), but never across a
    change of the CA bundle: a rotated-out CA stops authenticating at once."""
    ca_key, new_key = _key(), _key()
    ca, new_ca = _cert("ca", ca_key, ca=True), _cert("ca2", new_key, ca=True)
    leaf = _cert("alice", _key(), (ca, ca_key), eku=CLIENT)
    bundle = CABundle("client CA", pem=pki.cert_pem(ca))
    assert bundle.verify_client([leaf]) == leaf
    assert bundle.verify_client([leaf]) == leaf  # remembered
    assert bundle.set_pem(pki.cert_pem(new_ca))
    with pytest.raises(VerificationError):
        bundle.verify_client([leaf])


def test_a_remembered_chain_is_not_kept_past_its_expiry():
    ca_key = _key()
    ca = _cert("ca", ca_key, ca=True)
    # valid for 30 s more: remembered for at most that long, not the minute
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=1) + dt.timedelta(seconds=30)
    leaf = _cert("alice", _key(), (ca, ca_key), eku=CLIENT, start=start, days=1)
    bundle = CABundle("client CA", pem=pki.cert_pem(ca))
    assert bundle.verify_client([leaf]) == leaf
    (until,) = [until for _, until in bundle._verified.values()]
    assert until == leaf.not_valid_after_utc
    with pytest.raises(VerificationError):  # a given time past expiry is checked afresh
        bundle.verify_client([leaf], now=leaf.not_valid_after_utc + dt.timedelta(seconds=1))


def _openssl(tmp: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True, timeout=60)


def openssl_pki(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA from a plain `openssl req -x509` (no keyUsage) and a client certificate it signs
    with no extension file (no EKU, no keyUsage)."""
    _openssl(tmp, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "30", "-subj", "/CN=plain-openssl-ca")
    _openssl(tmp, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr",
             "-subj", "/O=system:masters/CN=carol")
    _openssl(tmp, "x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "client.crt", "-days", "30")
    return tmp / "ca.crt", tmp / "client.crt", tmp / "client.key"


def test_openssl_ca_without_key_usage(tmp_path):
    ca_file, client_crt, _ = openssl_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    with pytest.raises(x509.ExtensionNotFound):
        ca.extensions.get_extension_for_class(x509.KeyUsage)  # what the old verifier refused
    leaf = x509.load_pem_x509_certificate(client_crt.read_bytes())
    assert CABundle("client CA", path=ca_file).verify_client([leaf]) == leaf


async def test_openssl_client_ca_over_tls(pkis: PKI, tmp_path) -> None:
    ca_file, client_crt, client_key = openssl_pki(tmp_path)
    async with serve(settings(pkis, client_ca_file=str(ca_file))) as (url, _):
        ctx = pkis.client_ctx()
        ctx.load_cert_chain(client_crt, client_key)
        r = await get(f"{url}/apis", ctx)
    assert r.status_code == 200, r.text
    assert r.json()["user"]["name"] == "carol" and "system:masters" in r.json()["user"]["groups"]


def test_openssl_v1_client_cert_from_another_ca_is_rejected(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ca_a, _, _ = openssl_pki(tmp_path / "a")
    _, client_b, _ = openssl_pki(tmp_path / "b")  # same CA name, other key
    leaf = x509.load_pem_x509_certificate(client_b.read_bytes())
    assert leaf.version is x509.Version.v1
    with pytest.raises(VerificationError):
        CABundle("client CA", path=ca_a).verify_client([leaf])
