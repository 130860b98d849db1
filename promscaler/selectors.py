"""Kubernetes label selectors: the string form (`app=web,tier in (a,b),!canary`) and the
`LabelSelector` object form (`matchLabels`, `matchExpressions`), parsed into one list of
requirements that the adapter turns into PromQL matchers and the autoscaler matches pods with.

The grammar and validation follow apimachinery's `labels.Parse` and
`metav1.LabelSelectorAsSelector`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "from_label_selector",
    "go_label_selector",
    "parse_selector",
    "to_label_selector",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed or is not valid."""


class Operator(StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY_RE = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")
_INT_RE = re.compile(r"^-?[0-9]+$")


def _check_key(key: str) -> str:
    prefix, _, name = key.rpartition("/")
    if not _KEY_RE.match(key) or len(name) > 63 or len(prefix) > 253:
        raise SelectorError(f"invalid label key {key!r}: must be a qualified name (e.g. 'app' or 'example.com/tier')")
    return key


def _check_value(value: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorError(
            f"invalid label value {value!r}: at most 63 characters, alphanumerics with '-', '_' or '.' inside"
        )
    return value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause of a selector. `values` is sorted, as apimachinery keeps it."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        op = self.operator
        if op is Operator.EXISTS:
            return present
        if op is Operator.DOES_NOT_EXIST:
            return not present
        if op is Operator.EQUALS or op is Operator.IN:
            return present and labels[self.key] in self.values
        if op is Operator.NOT_EQUALS or op is Operator.NOT_IN:
            return not present or labels[self.key] not in self.values
        if not present or not _INT_RE.match(labels[self.key]):
            return False
        actual, bound = int(labels[self.key]), int(self.values[0])
        return actual > bound if op is Operator.GREATER_THAN else actual < bound

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return f"!{self.key}"
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({','.join(self.values)})"
        if op is Operator.GREATER_THAN:
            return f"{self.key}>{self.values[0]}"
        if op is Operator.LESS_THAN:
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op.value}{self.values[0]}"


@dataclass(frozen=True, slots=True)
class Selector:
    """A conjunction of requirements; empty matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def pinned(self) -> tuple[str, str] | None:
        """A label=value every object it matches has (its first `k=v` or `k in (v)`), if it names one:
        what an index by label=value looks a selector's candidates up by."""
        for req in self.requirements:
            if req.operator in (Operator.EQUALS, Operator.IN) and len(req.values) == 1:
                return req.key, req.values[0]
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _requirement(key: str, op: Operator, values: Sequence[str]) -> Requirement:
    _check_key(key)
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        if values:
            raise SelectorError(f"values must be empty for operator {op.value!r} on key {key!r}")
        return Requirement(key, op)
    if not values:
        raise SelectorError(f"operator {op.value!r} on key {key!r} needs at least one value")
    if op in (Operator.EQUALS, Operator.NOT_EQUALS, Operator.GREATER_THAN, Operator.LESS_THAN) and len(values) != 1:
        raise SelectorError(f"operator {op.value!r} on key {key!r} takes exactly one value")
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if not _INT_RE.match(values[0]):
            raise SelectorError(f"operator {op.value!r} on key {key!r} needs an integer value, got {values[0]!r}")
        return Requirement(key, op, (values[0],))
    return Requirement(key, op, tuple(sorted({_check_value(v) for v in values})))


_TOKEN_RE = re.compile(r"\s*(==|!=|=|>|<|!|\(|\)|,|[^\s=!<>(),]+)")


def _tokens(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            break
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return tokens


def parse_selector(text: str | None) -> Selector:
    """Parse the string form, as in `?labelSelector=` and `scale.status.selector`."""
    if text is None or not text.strip():
        return Selector()
    toks, i, reqs = _tokens(text), 0, []

    def peek(offset: int = 0) -> str | None:
        return toks[i + offset] if i + offset < len(toks) else None

    while True:
        if peek() == "!":
            key = peek(1)
            if key is None or key in "=!<>(),":
                raise SelectorError(f"unable to parse requirement in {text!r}: '!' must be followed by a key")
            reqs.append(_requirement(key, Operator.DOES_NOT_EXIST, ()))
            i += 2
        else:
            key = peek()
            if key is None or key in ("=", "==", "!=", "<", ">", "(", ")", ","):
                raise SelectorError(f"unable to parse requirement in {text!r}: expected a label key, found {key!r}")
            i += 1
            op_tok = peek()
            if op_tok in (None, ","):
                reqs.append(_requirement(key, Operator.EXISTS, ()))
            elif op_tok in ("=", "==", "!=", ">", "<"):
                i += 1
                value = peek()
                if value in (None, ","):
                    value = ""
                elif value in ("=", "==", "!=", "<", ">", "(", ")", "!"):
                    raise SelectorError(f"unable to parse requirement in {text!r}: bad value after {op_tok!r}")
                else:
                    i += 1
                op = {
                    "=": Operator.EQUALS, "==": Operator.EQUALS, "!=": Operator.NOT_EQUALS,
                    ">": Operator.GREATER_THAN, "<": Operator.LESS_THAN,
                }[op_tok]
                if op in (Operator.GREATER_THAN, Operator.LESS_THAN) and not value:
                    raise SelectorError(f"unable to parse requirement in {text!r}: {op_tok!r} needs a value")
                reqs.append(_requirement(key, op, (value,)))
            elif op_tok in ("in", "notin"):
                i += 1
                if peek() != "(":
                    raise SelectorError(f"unable to parse requirement in {text!r}: expected '(' after {op_tok!r}")
                i += 1
                values: list[str] = []
                while True:
                    tok = peek()
                    if tok is None:
                        raise SelectorError(f"unable to parse requirement in {text!r}: missing ')'")
                    if tok == ")":
                        if values and values[-1] is None:  # trailing comma means an empty value
                            values[-1] = ""
                        i += 1
                        break
                    if tok == ",":
                        values.append("" if not values or values[-1] is None else None)  # type: ignore[arg-type]
                        i += 1
                        continue
                    if values and values[-1] is None:
                        values[-1] = tok
                    elif not values:
                        values.append(tok)
                    else:
                        raise SelectorError(
                            f"unable to parse requirement in {text!r}: expected ',' or ')' in value set")
                    i += 1
                vals = [v for v in values if v is not None]
                reqs.append(_requirement(key, Operator.IN if op_tok == "in" else Operator.NOT_IN, vals))
            else:
                raise SelectorError(f"unable to parse requirement in {text!r}: unknown operator {op_tok!r}")
        tok = peek()
        if tok is None:
            break
        if tok != ",":
            raise SelectorError(f"unable to parse requirement in {text!r}: expected ',' but found {tok!r}")
        i += 1
        if peek() is None:
            raise SelectorError(f"unable to parse requirement in {text!r}: trailing ','")
    return Selector(tuple(sorted(reqs, key=lambda r: (r.key, r.operator.value))))


_EXPR_OPS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def from_label_selector(obj: Mapping | None) -> Selector:
    """Convert a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).

    `None` selects everything, as for an HPA metric without `selector`.
    """
    if obj is None:
        return Selector()
    if not isinstance(obj, Mapping):
        raise SelectorError("selector must be an object with matchLabels and/or matchExpressions")
    unknown = set(obj) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise SelectorError(f"unknown selector field(s): {', '.join(sorted(unknown))}")
    labels = obj.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise SelectorError("matchLabels: must be an object")
    expressions = obj.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions: must be a list")
    reqs: list[Requirement] = []
    for key, value in labels.items():
        if not isinstance(value, str):
            raise SelectorError(f"matchLabels[{key!r}]: value must be a string")
        reqs.append(_requirement(str(key), Operator.EQUALS, (value,)))
    for n, expr in enumerate(expressions):
        if not isinstance(expr, Mapping):
            raise SelectorError(f"matchExpressions[{n}]: must be an object")
        operator = expr.get("operator")
        op = _EXPR_OPS.get(operator) if isinstance(operator, str) else None
        if op is None:
            raise SelectorError(
                f"matchExpressions[{n}].operator: {expr.get('operator')!r} "
                "is not one of In, NotIn, Exists, DoesNotExist"
            )
        values = expr.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError(f"matchExpressions[{n}].values: must be a list of strings")
        try:
            reqs.append(_requirement(str(expr.get("key", "")), op, values))
        except SelectorError as exc:
            raise SelectorError(f"matchExpressions[{n}]: {exc}") from None
    return Selector(tuple(sorted(reqs, key=lambda r: (r.key, r.operator.value))))


_OBJECT_OPS = {
    Operator.IN: "In",
    Operator.NOT_IN: "NotIn",
    Operator.EXISTS: "Exists",
    Operator.DOES_NOT_EXIST: "DoesNotExist",
}


def to_label_selector(sel: Selector) -> dict | None:
    """The `metav1.LabelSelector` object of a parsed selector (`None` when empty), as the v1beta2
    custom metrics API echoes `metric.selector`. `!=` becomes `NotIn`; `gt`/`lt` have no object form."""
    if sel.empty():
        return None
    match_labels: dict[str, str] = {}
    exprs: list[dict] = []
    for r in sel.requirements:
        if r.operator is Operator.EQUALS:
            match_labels[r.key] = r.values[0]
        elif r.operator is Operator.NOT_EQUALS:
            exprs.append({"key": r.key, "operator": "NotIn", "values": list(r.values)})
        elif r.operator in _OBJECT_OPS:
            expr: dict[str, Any] = {"key": r.key, "operator": _OBJECT_OPS[r.operator]}
            if r.values:
                expr["values"] = list(r.values)
            exprs.append(expr)
    out: dict = {}
    if match_labels:
        out["matchLabels"] = match_labels
    if exprs:
        out["matchExpressions"] = exprs
    return out


def go_label_selector(obj: Mapping | None) -> str:
    """A `LabelSelector` object as Go prints a `*metav1.LabelSelector` with `%v`/`%+v` (its generated
    `String()`): what Kubernetes writes into HPA events and conditions. Map keys sorted; each match
    expression `LabelSelectorRequirement{Key:k,Operator:In,Values:[a b],}` followed by a comma."""
    if obj is None:
        return "nil"
    labels = obj.get("matchLabels") or {}
    label_part = "".join(f"{k}: {labels[k]}," for k in sorted(labels, key=str))
    exprs = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key', '')},Operator:{e.get('operator', '')},"
        f"Values:[{' '.join(str(v) for v in e.get('values') or [])}],}},"
        for e in obj.get("matchExpressions") or []
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{label_part}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}"
    )
