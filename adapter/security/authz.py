"""Authorization, as k8s.io/apiserver's delegating authorizer: always-allow paths and groups,
then a SubjectAccessReview against the cluster, with separate TTLs for allowed and denied answers.

A review that cannot be made is an error (503 at the edge), never an allow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapter.security.authn import ReviewUnavailable, UserInfo, short_error
from adapter.security.requestinfo import RequestInfo
from adapter.ttlcache import TTLCache

if TYPE_CHECKING:
    from promscaler.kubeapi import Kube

__all__ = ["Authorizer", "Decision", "forbidden_message", "forbidden_status", "path_always_allowed"]

DEFAULT_ALWAYS_ALLOW_GROUPS = ("system:masters",)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    source: str = "review"  # review | cache | always-allow-group


def path_always_allowed(path: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Exact paths, or prefixes written with a trailing `*` (as the Kubernetes path authorizer)."""
    for p in patterns:
        if p.endswith("*"):
            if path.startswith(p[:-1]):
                return True
        elif path == p:
            return True
    return False


def sar_spec(user: UserInfo, info: RequestInfo) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    if info.is_resource_request:
        attrs = {
            "namespace": info.namespace, "verb": info.verb, "group": info.api_group,
            "version": info.api_version, "resource": info.resource, "subresource": info.subresource,
            "name": info.name,
        }
        spec["resourceAttributes"] = {k: v for k, v in attrs.items() if v}
    else:
        spec["nonResourceAttributes"] = {"path": info.path, "verb": info.verb}
    return spec


class Authorizer:
    """Asks `authorization.k8s.io/v1` SubjectAccessReview; caches answers by the review's spec."""

    def __init__(
        self,
        kube: Kube | None,
        *,
        allowed_ttl: float = 10.0,
        denied_ttl: float = 10.0,
        always_allow_groups: tuple[str, ...] | list[str] = DEFAULT_ALWAYS_ALLOW_GROUPS,
        timeout: float = 5.0,
    ) -> None:
        self._api = kube
        self.allowed_ttl, self.denied_ttl, self.timeout = allowed_ttl, denied_ttl, timeout
        self.always_allow_groups = tuple(always_allow_groups)
        self.cache: TTLCache[Decision] = TTLCache()
        self.calls = 0

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if any(g in self.always_allow_groups for g in user.groups):
            return Decision(True, "", "always-allow-group")
        # what the review's spec is made of (sar_spec), hashed as it is: no spec to build per request
        key = (user.name, user.uid, user.groups, tuple(sorted(user.extra.items())) if user.extra else (), info)
        hit = self.cache.get(key)
        if hit is not None:
            return Decision(hit.allowed, hit.reason, "cache")
        if self._api is None:
            raise ReviewUnavailable("no authorization kubeconfig: cannot ask for a SubjectAccessReview")
        from adapter.kube import request_json

        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": sar_spec(user, info)}
        self.calls += 1
        try:
            resp = await request_json(self._api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                      body, self.timeout)
        except Exception as exc:
            raise ReviewUnavailable(f"SubjectAccessReview failed: {short_error(exc)}") from None
        st = resp.get("status")
        if not isinstance(st, dict):
            raise ReviewUnavailable("SubjectAccessReview returned no status")
        allowed = bool(st.get("allowed")) and not bool(st.get("denied"))
        if not allowed and st.get("evaluationError") and not st.get("reason"):
            # k8s: an evaluation error with no decision is an error, not a cached denial
            raise ReviewUnavailable(f"SubjectAccessReview evaluation error: {st['evaluationError']}")
        decision = Decision(allowed, st.get("reason") or "")
        self.cache.put(key, decision, self.allowed_ttl if allowed else self.denied_ttl)
        return decision


def forbidden_message(user: UserInfo, info: RequestInfo, reason: str = "") -> str:
    """The apiserver's words: `<resource>.<group> "<name>" is forbidden: User "u" cannot ...`."""
    if not info.is_resource_request:
        msg = f'User "{user.name}" cannot {info.verb} path "{info.path}"'
    else:
        resource = info.resource + (f"/{info.subresource}" if info.subresource else "")
        where = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
        msg = f'User "{user.name}" cannot {info.verb} resource "{resource}" in API group "{info.api_group}" {where}'
    if reason:
        msg = f"{msg}: {reason}"
    qualified = info.resource + (f".{info.api_group}" if info.api_group else "") if info.is_resource_request else ""
    if not qualified:
        return f"forbidden: {msg}"
    if info.name:
        return f'{qualified} "{info.name}" is forbidden: {msg}'
    return f"{qualified} is forbidden: {msg}"


def forbidden_status(user: UserInfo, info: RequestInfo, reason: str = "") -> dict[str, Any]:
    from promscaler.status import Forbidden

    details = None
    if info.is_resource_request:
        details = {k: v for k, v in {"name": info.name, "group": info.api_group, "kind": info.resource}.items() if v}
    return Forbidden(forbidden_message(user, info, reason), details).to_status()
