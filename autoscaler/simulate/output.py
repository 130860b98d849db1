"""The `-o json` object of a decision, and `--check`: comparing it with a scenario's `expect:`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from promscaler.quantity import QuantityError, parse_quantity

from ..decision import Decision

__all__ = ["check", "decision_json"]

_QUANTITY_KEYS = {"value", "averageValue"}


# --- output --------------------------------------------------------------------------------------


def decision_json(d: Decision) -> dict[str, Any]:
    """The `-o json` object of the contract."""
    proposals = []
    for p in d.proposals:
        item: dict[str, Any] = {"type": p.type, "name": p.name, "replicas": p.replicas}
        if p.error is not None:
            item["error"] = p.error
        proposals.append(item)
    return {
        "desiredReplicas": d.desired_replicas,
        "currentReplicas": d.current_replicas,
        "scale": d.scale,
        "currentMetrics": d.current_metrics,
        "proposals": proposals,
        "recommendation": d.recommendation,
        "conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                       for c in d.conditions],
        "explanation": d.explanation,
        **({} if d.controls is None else {"controls": controls_json(d)}),
    }


def controls_json(d: Decision) -> dict[str, Any]:
    """What the opt-in controls did (docs/controls.md); absent for an HPA's decision."""
    c = d.controls
    assert c is not None
    out: dict[str, Any] = {"control": c.summary(), "paused": c.paused, "fallback": c.fallback,
                           "failures": c.failures}
    if c.paused_replicas is not None:
        out["pausedReplicas"] = c.paused_replicas
    if c.window is not None:
        out["schedule"], out["floor"] = c.window, c.floor
    if c.activation is not None:
        out["activation"] = c.activation
    return out


def _show(value: Any) -> str:
    """A value in a difference message: JSON, or Python's repr for what JSON cannot hold."""
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def _match(expected: Any, actual: Any, path: str, key: str | None, diffs: list[str]) -> None:
    """Expected is a subset of actual; quantities compare by value, errors by substring."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            diffs.append(f"{path}: expected an object, got {_show(actual)}")
            return
        for k, v in expected.items():
            if k not in actual:
                diffs.append(f"{path}.{k}: expected {_show(v)}, got nothing")
            else:
                _match(v, actual[k], f"{path}.{k}", k, diffs)
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            got = len(actual) if isinstance(actual, list) else _show(actual)
            diffs.append(f"{path}: expected {len(expected)} entries, got {got}")
            return
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _match(e, a, f"{path}[{i}]", None, diffs)
        return
    if key in _QUANTITY_KEYS and not isinstance(expected, bool):
        qe, qa = _quantity(expected), _quantity(actual)
        if qe is not None and qa is not None and qe == qa:
            return
    elif (key == "error" and isinstance(expected, str) and isinstance(actual, str) and expected in actual) or (
            expected == actual and type(expected) is type(actual)):
        return
    diffs.append(f"{path}: expected {_show(expected)}, got {_show(actual)}")


def check(expect: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    """What differs between `expect:` and the decision, field by field (empty: ok)."""
    diffs: list[str] = []
    for key in ("desiredReplicas", "recommendation", "scale"):
        if key in expect and expect[key] != result[key]:
            diffs.append(f"{key}: expected {_show(expect[key])}, got {_show(result[key])}")
    if "control" in expect:
        got = (result.get("controls") or {}).get("control", "")
        if expect["control"] != got:
            diffs.append(f"control: expected {_show(expect['control'])}, got {_show(got)}")
    for key in ("currentMetrics", "proposals"):
        if key in expect:
            _match(expect[key], result[key], key, None, diffs)
    if "conditions" in expect:
        actual = {c["type"]: c["reason"] for c in result["conditions"]}
        for ctype, reason in expect["conditions"].items():
            got = actual.get(ctype)
            if got != reason:
                diffs.append(f"conditions.{ctype}: expected {reason}, got {got or 'no such condition'}")
    return diffs
