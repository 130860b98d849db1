"""What a request asks for, in authorization terms: Kubernetes' RequestInfoFactory, replicated.

`/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/http_requests` is a resource request:
verb get, group custom.metrics.k8s.io, version v1beta2, namespace web, resource pods, name `*`,
subresource http_requests. `/apis`, `/apis/<group>`, `/apis/<group>/<version>`, `/openapi/v2`
are non-resource requests authorized by path and lowercase HTTP method.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qs

__all__ = ["RequestInfo", "request_info"]

_API_PREFIXES = {"api", "apis"}
_GROUPLESS = {"api"}
_SPECIAL_VERBS = {"proxy", "watch"}
_SPECIAL_VERBS_NO_SUBRESOURCES = {"proxy"}
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class RequestInfo:
    is_resource_request: bool
    path: str
    verb: str
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


@lru_cache(maxsize=1024)
def request_info(method: str, path: str, query_string: bytes | str = b"") -> RequestInfo:
    """Parse like k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory.NewRequestInfo (a pure
    function of the request line: kept, as autoscalers ask the same paths every sync period)."""
    non_resource = RequestInfo(False, path, method.lower())
    parts = [p for p in path.strip("/").split("/")] if path.strip("/") else []
    if len(parts) < 1 or parts[0] not in _API_PREFIXES:
        return non_resource
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in _GROUPLESS:
        if len(parts) < 2:
            return non_resource
        group, parts = parts[0], parts[1:]
    if len(parts) < 1:
        return non_resource
    version, parts = parts[0], parts[1:]
    if not parts:  # /apis/<group>/<version> is discovery: a non-resource request
        return non_resource

    verb = _METHOD_VERBS.get(method.upper(), "")
    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            return non_resource  # k8s: "unable to determine kind and namespace" -> treat as non-resource
        verb, parts = parts[0], parts[1:]

    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]

    resource = name = subresource = ""
    if len(parts) >= 3 and verb not in _SPECIAL_VERBS_NO_SUBRESOURCES:
        subresource = parts[2]
    if len(parts) >= 2:
        name = parts[1]
    if len(parts) >= 1:
        resource = parts[0]

    if not name and verb == "get":
        qs = parse_qs(query_string.decode() if isinstance(query_string, bytes) else query_string)
        watch = (qs.get("watch") or [""])[0].lower()
        verb = "watch" if watch in ("1", "true") else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(True, path, verb, group, version, namespace, resource, subresource, name)
