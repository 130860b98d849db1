"""PATCH bodies: JSON merge patch (RFC 7386), a small strategic merge patch (merge patch plus
keyed lists for the common pod-template fields), and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

from promscaler.status import BadRequest, Invalid, StatusError

__all__ = [
    "JSON_PATCH",
    "MERGE_TYPES",
    "UnsupportedMediaType",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
]

MERGE_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml")
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class UnsupportedMediaType(StatusError):
    code, reason = 415, "UnsupportedMediaType"


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# list fields whose items strategic merge patch merges by a key (the common ones in pod templates)
_MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
               "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
               "conditions": "type", "ownerReferences": "uid"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A small strategic merge patch: merge patch, plus lists of known fields merged by their
    key (`containers` by name, ...), `$patch: delete|replace`, and kubectl's ordering directives
    ignored. Enough for what kubectl apply sends."""
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif key in _MERGE_KEYS and isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(out[key], value, _MERGE_KEYS[key])
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    return out


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if not all(isinstance(x, dict) and key in x for x in current + patch):
        return patch
    merged = {x[key]: x for x in current}
    order = [x[key] for x in current]
    for item in patch:
        k = item[key]
        if item.get("$patch") == "delete":
            merged.pop(k, None)
            continue
        if k not in merged:
            order.append(k)
        merged[k] = strategic_merge_patch(merged.get(k), item)
    return [merged[k] for k in order if k in merged]


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise BadRequest(f"json patch: path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    cur = doc
    for p in parts[:-1]:
        try:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        except (KeyError, IndexError, ValueError, TypeError):
            raise Invalid(f"json patch: path {path!r} does not exist") from None
    return cur


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    try:
        return parent[int(parts[-1])] if isinstance(parent, list) else parent[parts[-1]]
    except (KeyError, IndexError, ValueError, TypeError):
        raise Invalid(f"json patch: path {path!r} does not exist") from None


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    try:
        return parent.pop(int(parts[-1]) if isinstance(parent, list) else parts[-1])
    except (KeyError, IndexError, ValueError, TypeError):
        raise Invalid(f"json patch: cannot remove {path!r}: it does not exist") from None


def _add(doc: Any, path: str, value: Any, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, list):
        idx = len(parent) if last == "-" else int(last)
        if replace:
            parent[idx] = value
        else:
            parent.insert(idx, value)
    elif isinstance(parent, dict):
        if replace and last not in parent:
            raise Invalid(f"json patch: cannot replace {path!r}: it does not exist")
        parent[last] = value
    else:
        raise Invalid(f"json patch: parent of {path!r} is not an object or array")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise BadRequest("json patch: body must be a JSON array of operations")
    for n, op in enumerate(ops):
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise BadRequest(f"json patch: operation {n} needs 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, op.get("value"), replace=True)
        elif kind == "move":
            doc = _add(doc, path, _remove(doc, op["from"]))
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise Invalid(f"json patch: test operation on {path!r} failed")
        else:
            raise BadRequest(f"json patch: unknown operation {kind!r}")
    return doc


def apply_patch(content_type: str, doc: Any, patch: Any, strategic: bool = True) -> Any:
    """Apply a PATCH body of the given media type to a (copied) object. Custom resources
    (`strategic=False`) refuse strategic merge patches, as kube-apiserver does."""
    media = content_type.split(";")[0].strip().lower()
    if media == STRATEGIC and not strategic:
        raise UnsupportedMediaType(
            f"the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, "
            "application/merge-patch+json, application/apply-patch+yaml")
    if media == JSON_PATCH:
        return json_patch(doc, patch)
    if media in MERGE_TYPES:
        if not isinstance(patch, dict):
            raise BadRequest(f"{media} body must be a JSON object")
        return strategic_merge_patch(doc, patch) if media == STRATEGIC else merge_patch(doc, patch)
    raise UnsupportedMediaType(
        f"unsupported patch content type {content_type!r}; use {JSON_PATCH} or one of {', '.join(MERGE_TYPES)}"
    )
