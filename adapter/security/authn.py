"""Authentication, in the order and with the rules of k8s.io/apiserver's delegating authenticator.

1. Front proxy (request headers): `X-Remote-User`/`-Group`/`-Uid`/`-Extra-*` are believed only
   when the TLS client certificate verifies against the request-header CA and its CN is one of
   the allowed names (none listed = any CN from that CA). In every other case they are ignored,
   and they are always removed from the request before the application sees it.
2. x509: a client certificate verifying against `--client-ca-file`: user = CN, groups = O.
3. Bearer token: a TokenReview against the cluster (results cached for a short TTL).
4. Anonymous (`system:anonymous`) only when no credential was presented at all and
   `--anonymous-auth` is on; a credential that fails is a 401, never anonymous.
Every authenticated user gets the group `system:authenticated`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.x509.verification import VerificationError

from adapter.security.tls import CABundle
from adapter.ttlcache import TTLCache

if TYPE_CHECKING:
    from promscaler.kubeapi import Kube

__all__ = [
    "ANONYMOUS",
    "AUTHENTICATED",
    "AuthResult",
    "Authenticator",
    "RequestHeaderConfig",
    "ReviewUnavailable",
    "TokenReviewer",
    "UserInfo",
    "read_authentication_configmap",
]

log = logging.getLogger("adapter.security.authn")

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def with_group(self, group: str) -> UserInfo:
        if group in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, group), self.extra)


@dataclass
class RequestHeaderConfig:
    """Header names and allowed proxy CNs (flags, else the ConfigMap, else kubeadm's values)."""

    username_headers: list[str] = field(default_factory=lambda: ["X-Remote-User"])
    uid_headers: list[str] = field(default_factory=lambda: ["X-Remote-Uid"])
    group_headers: list[str] = field(default_factory=lambda: ["X-Remote-Group"])
    extra_prefixes: list[str] = field(default_factory=lambda: ["X-Remote-Extra-"])
    allowed_names: list[str] = field(default_factory=list)

    def all_header_names(self) -> tuple[frozenset[bytes], tuple[bytes, ...]]:
        """Exact names and prefixes (lowercase bytes) of every identity header, configured or
        conventional: all are removed before the application sees the request."""
        return _identity_headers((*self.username_headers, *self.uid_headers, *self.group_headers),
                                 tuple(self.extra_prefixes))


@lru_cache(maxsize=16)
def _identity_headers(names: tuple[str, ...], prefixes: tuple[str, ...]) -> tuple[frozenset[bytes], tuple[bytes, ...]]:
    """`RequestHeaderConfig.all_header_names` for these configured names: built once per
    configuration, not per request."""
    exact = frozenset(h.lower().encode() for h in (*names, "X-Remote-User", "X-Remote-Uid", "X-Remote-Group"))
    return exact, tuple(p.lower().encode() for p in (*prefixes, "X-Remote-Extra-"))


@dataclass(frozen=True)
class AuthResult:
    user: UserInfo | None
    method: str  # requestheader | x509 | token | anonymous | none
    error: str = ""


class ReviewUnavailable(Exception):
    """The cluster could not answer a review; never treated as an allow."""


def _cn(cert: x509.Certificate) -> str:
    attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else ""


def _orgs(cert: x509.Certificate) -> tuple[str, ...]:
    return tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))


@lru_cache(maxsize=64)
def _wire_names(names: tuple[str, ...]) -> tuple[bytes, ...]:
    """Header names as the ASGI scope carries them (lowercase bytes), per configuration."""
    return tuple(n.lower().encode() for n in names)


def _header_values(headers: list[tuple[bytes, bytes]], names: list[str]) -> list[str]:
    out: list[str] = []
    for name in _wire_names(tuple(names)):
        out += [v.decode("latin-1") for k, v in headers if k == name and v]
    return out


def _first_header(headers: list[tuple[bytes, bytes]], names: list[str]) -> str:
    """Go's `headerValue`: the first value of the first header (in `names` order) that is non-empty."""
    for key in _wire_names(tuple(names)):
        first = next((v for k, v in headers if k == key), b"")
        if first:
            return first.decode("latin-1")
    return ""


class TokenReviewer:
    """Bearer tokens -> users through authentication.k8s.io/v1 TokenReview, cached by token hash."""

    def __init__(self, kube: Kube, ttl: float = 10.0, timeout: float = 5.0, cache: TTLCache | None = None) -> None:
        self._api = kube
        self._ttl, self._timeout = ttl, timeout
        self.cache: TTLCache[tuple[UserInfo | None, str]] = cache or TTLCache()
        self.calls = 0

    async def review(self, token: str) -> tuple[UserInfo | None, str]:
        """(user, "") when valid, (None, reason) when the cluster says no; raises ReviewUnavailable."""
        key = hashlib.sha256(token.encode()).hexdigest()
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        from adapter.kube import request_json

        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        self.calls += 1
        try:
            resp = await request_json(self._api, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body,
                                      self._timeout)
        except Exception as exc:  # ApiError, aiohttp errors, timeouts: all mean "could not ask"
            raise ReviewUnavailable(f"TokenReview failed: {short_error(exc)}") from None
        status = resp.get("status") or {}
        u = status.get("user")
        if not status.get("authenticated") or not u:
            result: tuple[UserInfo | None, str] = (None, status.get("error") or "token not authenticated")
        else:
            extra = {k: tuple(v or ()) for k, v in (u.get("extra") or {}).items()}
            result = (UserInfo(u.get("username") or "", u.get("uid") or "", tuple(u.get("groups") or ()), extra), "")
        self.cache.put(key, result, self._ttl)
        return result


def short_error(exc: Exception) -> str:
    """One line: an answer (`ApiError`) as its status line (`HTTP 503 Service Unavailable`), else the
    exception's type and first line."""
    status = getattr(exc, "status", None)
    if status:
        return f"HTTP {status} {getattr(exc, 'phrase', '')}".strip()
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


class Authenticator:
    """The union of the four authenticators above, evaluated per request scope."""

    def __init__(
        self,
        *,
        requestheader: RequestHeaderConfig | None = None,
        requestheader_ca: CABundle | None = None,
        client_ca: CABundle | None = None,
        token_reviewer: TokenReviewer | None = None,
        anonymous: bool = False,
    ) -> None:
        self.requestheader = requestheader or RequestHeaderConfig()
        self.requestheader_ca = requestheader_ca
        self.client_ca = client_ca
        self.token_reviewer = token_reviewer
        self.anonymous = anonymous

    def strip_headers(self, headers: list[tuple[bytes, bytes]], drop_authorization: bool) -> list[tuple[bytes, bytes]]:
        """The request headers without any front-proxy identity header (and Authorization)."""
        exact, prefixes = self.requestheader.all_header_names()
        return [
            (k, v) for k, v in headers
            if k not in exact and not k.startswith(prefixes) and not (drop_authorization and k == b"authorization")
        ]

    def _from_headers(self, headers: list[tuple[bytes, bytes]]) -> UserInfo | None:
        rh = self.requestheader
        name = _first_header(headers, rh.username_headers)
        if not name:
            return None
        uid = _first_header(headers, rh.uid_headers)
        groups = tuple(_header_values(headers, rh.group_headers))
        extra: dict[str, list[str]] = {}
        for prefix in _wire_names(tuple(rh.extra_prefixes)):  # prefixes first, as Go orders values
            for k, v in headers:
                if k.startswith(prefix) and len(k) > len(prefix):
                    key = unquote(k[len(prefix):].decode("latin-1").lower())
                    extra.setdefault(key, []).append(v.decode("latin-1"))
        return UserInfo(name, uid, groups, {k: tuple(v) for k, v in extra.items()})

    async def authenticate(self, headers: list[tuple[bytes, bytes]], chain: list[x509.Certificate]) -> AuthResult:
        errors: list[str] = []
        # 1. front proxy
        if chain and self.requestheader_ca:
            try:
                leaf = self.requestheader_ca.verify_client(chain)
            except VerificationError as exc:
                errors.append(f"request-header client certificate: {exc}")
            else:
                allowed = self.requestheader.allowed_names
                if allowed and _cn(leaf) not in allowed:
                    errors.append(f"request-header client certificate: CN {_cn(leaf)!r} is not an allowed name")
                else:
                    user = self._from_headers(headers)
                    if user is not None:
                        return AuthResult(user.with_group(AUTHENTICATED), "requestheader")
        # 2. x509 client certificate
        if chain and self.client_ca:
            try:
                leaf = self.client_ca.verify_client(chain)
            except VerificationError as exc:
                errors.append(f"x509: {exc}")
            else:
                if _cn(leaf):  # a certificate without a CN names no user (CommonNameUserConversion)
                    return AuthResult(UserInfo(_cn(leaf), "", _orgs(leaf)).with_group(AUTHENTICATED), "x509")
        # 3. bearer token
        token = _bearer(headers)
        if token is not None and self.token_reviewer is not None:
            try:
                user, reason = await self.token_reviewer.review(token)
            except ReviewUnavailable as exc:
                return AuthResult(None, "token", str(exc))
            if user is not None:
                return AuthResult(user.with_group(AUTHENTICATED), "token")
            errors.append(f"token: {reason}")
        if errors:
            return AuthResult(None, "none", "; ".join(errors))
        # 4. anonymous
        if self.anonymous:
            return AuthResult(UserInfo(ANONYMOUS, "", (UNAUTHENTICATED,)), "anonymous")
        return AuthResult(None, "none", "no credentials")

    def apply_configmap(self, data: dict[str, str], *, flags_requestheader_ca: bool, flags_client_ca: bool,
                        flags_headers: bool) -> bool:
        """Take CAs and header names from extension-apiserver-authentication; True if a CA changed."""
        changed = False
        if not flags_requestheader_ca and data.get("requestheader-client-ca-file"):
            if self.requestheader_ca is None:
                self.requestheader_ca = CABundle("requestheader-client-ca-file (ConfigMap)")
            changed |= self.requestheader_ca.set_pem(data["requestheader-client-ca-file"].encode())
        if not flags_client_ca and data.get("client-ca-file"):
            if self.client_ca is None:
                self.client_ca = CABundle("client-ca-file (ConfigMap)")
            changed |= self.client_ca.set_pem(data["client-ca-file"].encode())
        if not flags_headers:
            rh = self.requestheader
            for key, attr in (
                ("requestheader-username-headers", "username_headers"),
                ("requestheader-uid-headers", "uid_headers"),
                ("requestheader-group-headers", "group_headers"),
                ("requestheader-extra-headers-prefix", "extra_prefixes"),
                ("requestheader-allowed-names", "allowed_names"),
            ):
                if key in data:
                    try:
                        value = json.loads(data[key]) or []
                    except ValueError:
                        log.warning("ConfigMap extension-apiserver-authentication: %s is not a JSON list", key)
                        continue
                    if attr != "allowed_names" and not value:
                        continue  # keep the defaults rather than trusting no header
                    setattr(rh, attr, [str(v) for v in value])
        return changed


def _bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    for k, v in headers:
        if k == b"authorization":
            parts = v.decode("latin-1").strip().split(" ", 1)
            if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1].strip():
                return parts[1].strip()
            return None
    return None


async def read_authentication_configmap(kube: Kube) -> dict[str, str] | None:
    """kube-system/extension-apiserver-authentication's data; None when it does not exist."""
    from adapter.kube import request_json
    from promscaler.kubeapi import ApiError

    try:
        cm = await request_json(kube, "GET",
                                "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication",
                                timeout=10)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise ReviewUnavailable(
            f"cannot read configmap kube-system/extension-apiserver-authentication: {short_error(exc)}"
        ) from None
    except Exception as exc:
        raise ReviewUnavailable(
            f"cannot read configmap kube-system/extension-apiserver-authentication: {short_error(exc)}"
        ) from None
    return dict(cm.get("data") or {})
