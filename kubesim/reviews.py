"""TokenReview and SubjectAccessReview with a policy tests configure: known tokens, allow rules,
and a switch that makes both APIs fail (503) for "authentication API unavailable" paths."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from promscaler.status import BadRequest, Invalid, ServiceUnavailable

__all__ = ["AuthPolicy", "Rule"]

Obj = dict[str, Any]
MASTERS = "system:masters"


def _match(pattern: str, value: str) -> bool:
    return pattern == "*" or pattern == value


@dataclass(frozen=True, slots=True)
class Rule:
    subject: str  # a user name or a group name
    verb: str
    group: str  # API group ("" core); for non-resource requests ""
    resource: str  # plural, "plural/subresource", or a non-resource path like "/metrics"; "*" for any

    def allows(self, user: str, groups: list[str], verb: str, group: str, resource: str) -> bool:
        return ((self.subject == user or self.subject in groups) and _match(self.verb, verb)
                and _match(self.group, group) and _match(self.resource, resource))


@dataclass
class AuthPolicy:
    tokens: dict[str, Obj] = field(default_factory=dict)  # token -> {"username", "groups", "uid"?}
    rules: list[Rule] = field(default_factory=list)
    fail: bool = False
    counts: dict[str, int] = field(default_factory=lambda: {"tokenreviews": 0, "subjectaccessreviews": 0})
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def allow(self, subject: str, verb: str = "*", group: str = "*", resource: str = "*") -> None:
        with self._lock:
            self.rules.append(Rule(subject, verb, group, resource))

    def user_of(self, token: str | None) -> Obj | None:
        return self.tokens.get(token) if token else None

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1
        if self.fail:
            raise ServiceUnavailable(
                f"the server is currently unable to handle the request ({kind} disabled by the test)"
            )

    def token_review(self, body: Any) -> Obj:
        self._count("tokenreviews")
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise BadRequest("TokenReview: spec is required")
        token = body["spec"].get("token")
        if not token:
            raise Invalid("TokenReview is invalid: spec.token: Required value", {"kind": "TokenReview"})
        user = self.user_of(token)
        status: Obj = {"authenticated": user is not None}
        if user is None:
            status["error"] = "invalid bearer token"
        else:
            status["user"] = {"username": user["username"], "uid": user.get("uid", user["username"]),
                              "groups": [*user.get("groups", []), "system:authenticated"]}
            status["audiences"] = body["spec"].get("audiences") or []
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
                "spec": body["spec"], "status": status}

    def subject_access_review(self, body: Any) -> Obj:
        self._count("subjectaccessreviews")
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            raise BadRequest("SubjectAccessReview: spec is required")
        spec = body["spec"]
        user, groups = spec.get("user") or "", list(spec.get("groups") or [])
        if not user and not groups:
            raise Invalid(
                'SubjectAccessReview is invalid: spec.user: Invalid value: "": at least one of user or group '
                "must be specified",
                {"kind": "SubjectAccessReview"},
            )
        if "resourceAttributes" in spec:
            attrs = spec["resourceAttributes"] or {}
            verb, group = attrs.get("verb", ""), attrs.get("group", "")
            resource = attrs.get("resource", "") + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
            what = f'{verb} {resource} in group "{group}"'
        else:
            attrs = spec.get("nonResourceAttributes") or {}
            verb, group, resource = attrs.get("verb", ""), "", attrs.get("path", "")
            what = f"{verb} {resource}"
        with self._lock:
            rules = list(self.rules)
        allowed = MASTERS in groups or any(r.allows(user, groups, verb, group, resource) for r in rules)
        reason = (f"allowed by kubesim policy: {user or groups} may {what}" if allowed
                  else f"no kubesim policy rule lets {user or groups} {what}")
        return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
                "spec": spec, "status": {"allowed": allowed, "reason": reason}}
