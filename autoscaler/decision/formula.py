"""A KEDA `scalingModifiers.formula`: an expr-lang expression (github.com/expr-lang/expr, the
language KEDA compiles it with) over the triggers' values, by trigger name.

No maintained Python library speaks expr-lang, so the formula is translated token by token to a
Python expression and evaluated by `simpleeval` (an AST whitelist: names, arithmetic, comparisons,
conditionals, list comprehensions and the functions given here; never Python's `eval`). What
KEDA's documentation uses is covered: arithmetic (`+ - * / % ** ^`), comparisons, `&& || !` (and
`and or not`), nested ternaries `c ? a : b`, lists, `max min abs ceil floor round float int sum
mean median len`, and the predicates `count all any none one filter map` with `{# ...}`. Anything
else (strings, member access, `??`, ranges) is refused by name.

As KEDA does (apis/keda/v1alpha1 `ValidateAndCompileScalingModifiers`): the formula is checked once
with every named trigger at -1 and must give a number, not a boolean; at each polling its value
becomes the composite metric's, in milli-units truncated toward zero (`SetMilli(int64(v * 1000))`).
"""

from __future__ import annotations

import math
import re
import statistics
import threading
from ast import AST
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simpleeval import EvalWithCompoundTypes, InvalidExpression

__all__ = ["Formula", "FormulaError", "compile_formula"]


class FormulaError(ValueError):
    """The formula cannot be read, or cannot be evaluated on these values; the message says why."""


def _round(x: float) -> float:
    """Go's math.Round: half away from zero (Python's round() rounds half to even)."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "max": max, "min": min, "abs": abs, "ceil": math.ceil, "floor": math.floor, "round": _round,
    "float": float, "int": int, "sum": sum, "mean": statistics.fmean, "median": statistics.median, "len": len,
}
# expr-lang's predicates over a list with a closure `{...}` (`#` is the element)
_PREDICATES = {"count", "all", "any", "none", "one", "filter", "map"}
_WORDS = {"true": "True", "false": "False", "and": "and", "or": "or", "not": "not", "in": "in"}
_SYMBOLS = {"&&": "and", "||": "or", "!": "not", "^": "**"}
_TOKEN = re.compile(r"""\s*(?:
    (?P<number>0[xX][0-9a-fA-F_]+|(?:\d[\d_]*(?:\.\d[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|&&|\|\||==|!=|<=|>=|\?\?|\?\.|\.\.|[-+*/%^!<>?:()\[\]{},.\#])
  | (?P<other>\S)
)""", re.VERBOSE)


def _tokens(text: str) -> list[str]:
    out = []
    for m in _TOKEN.finditer(text):
        if m.group("other") is not None:
            raise FormulaError(f"{m.group('other')!r} is not supported (at character {m.start('other') + 1})")
        token = m.group("number") or m.group("name") or m.group("op")
        if token in ("??", "?.", "..", "."):
            raise FormulaError(f"{token!r} is not supported")
        out.append(token)
    if not out:
        raise FormulaError("is empty")
    return out


_CLOSE = {"(": ")", "[": "]", "{": "}"}


@dataclass
class _Group:
    """A bracketed part of the formula: its opening bracket and its items (tokens and groups)."""

    open: str
    items: list[Any] = field(default_factory=list)


def _nest(tokens: list[str]) -> list[Any]:
    stack: list[_Group] = [_Group("")]
    for t in tokens:
        if t in _CLOSE:
            stack.append(_Group(t))
        elif t in (")", "]", "}"):
            if len(stack) == 1 or _CLOSE[stack[-1].open] != t:
                raise FormulaError(f"unbalanced {t!r}")
            group = stack.pop()
            stack[-1].items.append(group)
        else:
            stack[-1].items.append(t)
    if len(stack) != 1:
        raise FormulaError(f"{stack[-1].open!r} is not closed")
    return stack[0].items


def _split(items: list[Any], sep: str) -> list[list[Any]]:
    parts: list[list[Any]] = [[]]
    for it in items:
        if it == sep:
            parts.append([])
        else:
            parts[-1].append(it)
    return parts


class _Translator:
    def __init__(self, names: Sequence[str]) -> None:
        self.names = set(names)
        self.used: set[str] = set()

    def seq(self, items: list[Any], var: str | None) -> str:
        """A sequence of one bracket level; the ternary (lowest, right-associative) first."""
        if "?" in items:
            q = items.index("?")
            depth = 0
            for j in range(q + 1, len(items)):
                if items[j] == "?":
                    depth += 1
                elif items[j] == ":":
                    if depth == 0:
                        cond, then, other = items[:q], items[q + 1:j], items[j + 1:]
                        if not cond or not then or not other:
                            raise FormulaError("a ternary needs a condition and two values: c ? a : b")
                        return f"(({self.seq(then, var)}) if ({self.seq(cond, var)}) else ({self.seq(other, var)}))"
                    depth -= 1
            raise FormulaError("'?' without its ':'")
        if ":" in items:
            raise FormulaError("':' without its '?'")
        out: list[str] = []
        i = 0
        while i < len(items):
            it = items[i]
            following = items[i + 1] if i + 1 < len(items) else None
            if isinstance(it, _Group):
                if it.open == "{":
                    raise FormulaError("a closure {...} is only supported as a predicate's second argument")
                inner = ", ".join(self.seq(p, var) for p in _split(it.items, ","))
                out.append(f"({inner})" if it.open == "(" else f"[{inner}]")
            elif isinstance(following, _Group) and following.open == "(" and re.match(r"[A-Za-z_]", it):
                out.append(self.call(it, following, var))
                i += 1
            elif it == "#":
                if var is None:
                    raise FormulaError("'#' is only supported inside a predicate's closure {...}")
                out.append(var)
            elif it in _SYMBOLS:
                out.append(_SYMBOLS[it])
            elif it in _WORDS:
                out.append(_WORDS[it])
            elif re.match(r"[A-Za-z_]", it):
                if it not in self.names:
                    raise FormulaError(f"unknown name {it} (the named triggers: {', '.join(sorted(self.names))})")
                self.used.add(it)
                out.append(it)
            elif it == ",":
                raise FormulaError("',' outside a call or a list")
            else:
                out.append(it.replace("_", "") if it[0].isdigit() and not it.lower().startswith("0x") else it)
            i += 1
        return " ".join(out)

    def call(self, name: str, args: _Group, var: str | None) -> str:
        parts = _split(args.items, ",")
        if name in _PREDICATES:
            if len(parts) != 2 or len(parts[1]) != 1 or not isinstance(parts[1][0], _Group) or parts[1][0].open != "{":
                raise FormulaError(f"{name}() takes a list and a closure {{...}}")
            inner = f"_e{0 if var is None else int(var[2:]) + 1}"
            items, body = self.seq(parts[0], var), self.seq(parts[1][0].items, inner)
            every = f"[{inner} for {inner} in ({items})]"
            kept = f"[{inner} for {inner} in ({items}) if ({body})]"
            return {"count": f"len({kept})", "all": f"(len({kept}) == len({every}))", "any": f"(len({kept}) > 0)",
                    "none": f"(len({kept}) == 0)", "one": f"(len({kept}) == 1)", "filter": kept,
                    "map": f"[({body}) for {inner} in ({items})]"}[name]
        if name not in _FUNCTIONS:
            raise FormulaError(f"function {name}() is not supported ({', '.join(sorted({*_FUNCTIONS, *_PREDICATES}))})")
        return f"{name}({', '.join(self.seq(p, var) for p in parts if p)})"


@dataclass(frozen=True)
class Formula:
    """A checked formula, ready to evaluate at every polling."""

    text: str
    names: tuple[str, ...]         # the trigger names it reads
    python: str                    # its translation, for simpleeval
    _parsed: AST = field(repr=False, compare=False)
    # one evaluator per thread, made once (making one costs several times an evaluation)
    _local: threading.local = field(default_factory=threading.local, repr=False, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:
        """Copied or pickled by compiling its text again (an evaluator is not copied)."""
        return compile_formula, (self.text, self.names)

    def value(self, values: Mapping[str, float]) -> float:
        """The formula on these trigger values; FormulaError when it cannot give a number."""
        evaluator = getattr(self._local, "evaluator", None)
        if evaluator is None:
            evaluator = self._local.evaluator = EvalWithCompoundTypes(functions=dict(_FUNCTIONS))  # it adds to them
        evaluator.names = dict(values)
        try:
            result = evaluator.eval(self.python, previously_parsed=self._parsed)
        except ZeroDivisionError:
            raise FormulaError("divides by zero") from None
        except (InvalidExpression, TypeError, ValueError, OverflowError, statistics.StatisticsError) as exc:
            raise FormulaError(str(exc)) from None
        if isinstance(result, bool) or not isinstance(result, int | float):
            raise FormulaError(f"must give a number, not {'a boolean' if isinstance(result, bool) else repr(result)}")
        number = float(result)
        if not math.isfinite(number):
            raise FormulaError(f"gives {number}")
        return number


def compile_formula(text: str, names: Sequence[str]) -> Formula:
    """The formula over the triggers `names`, checked as KEDA checks it (each name at -1: a
    division by zero there is no error, Go's float division has none); FormulaError says why not."""
    translator = _Translator(names)
    python = translator.seq(_nest(_tokens(text)), None)
    try:
        parsed = EvalWithCompoundTypes().parse(python)
    except SyntaxError as exc:
        raise FormulaError(f"is not a valid expression ({exc.msg})") from None
    formula = Formula(text, tuple(sorted(translator.used)), python, parsed)
    try:
        formula.value(dict.fromkeys(names, -1.0))
    except FormulaError as exc:
        if str(exc) != "divides by zero":
            raise
    return formula
