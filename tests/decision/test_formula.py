"""KEDA's `scalingModifiers.formula` (autoscaler/decision/formula.py): the examples of KEDA's docs
(keda.sh "Scaling Deployments", section "Scaling Modifiers"), each with the value its text says it
gives, KEDA's own test case (pkg/scaling/modifiers/formula_test.go), and what KEDA's validation
refuses (apis/keda/v1alpha1: the formula is compiled over the named triggers and must give a
number)."""

from __future__ import annotations

import pytest

from autoscaler.decision.formula import FormulaError, compile_formula

NAMES = ("trig_one", "trig_two", "trig_three")

CASES = [
    # "compose average value": the average of the two triggers
    ("(trig_one + trig_two)/2", {"trig_one": 3, "trig_two": 6}, 4.5),
    # "ternary operator": trig_one + trig_two when trig_one is more than 2, else 1
    ("trig_one > 2 ? trig_one + trig_two : 1", {"trig_one": 3, "trig_two": 5}, 8),
    ("trig_one > 2 ? trig_one + trig_two : 1", {"trig_one": 2, "trig_two": 5}, 1),
    # "count function": 5 when at least 2 of the three are more than 1, else 0
    ("count([trig_one,trig_two,trig_three],{#>1}) > 1 ? 5 : 0", {"trig_one": 2, "trig_two": 3, "trig_three": 0}, 5),
    ("count([trig_one,trig_two,trig_three],{#>1}) > 1 ? 5 : 0", {"trig_one": 2, "trig_two": 1, "trig_three": 0}, 0),
    # "nested conditions": trig_one < 2 and trig_one + trig_two >= 2 -> 5; only the first -> 10; else 0
    ("trig_one < 2 ? trig_one+trig_two >= 2 ? 5 : 10 : 0", {"trig_one": 1, "trig_two": 1}, 5),
    ("trig_one < 2 ? trig_one+trig_two >= 2 ? 5 : 10 : 0", {"trig_one": 1, "trig_two": 0.5}, 10),
    ("trig_one < 2 ? trig_one+trig_two >= 2 ? 5 : 10 : 0", {"trig_one": 2, "trig_two": 5}, 0),
    # formula_test.go TestCalculateScalingModifiersFormula: 2 + 5 = 7
    ("trig_one + trig_two", {"trig_one": 2, "trig_two": 5}, 7),
    # expr-lang's operators and built-ins (expr-lang.org Language Definition)
    ("max(trig_one, trig_two) / 2", {"trig_one": 3, "trig_two": 8}, 4),
    ("trig_one > 1 && !(trig_two > 1) || trig_three == 9 ? 2 ^ 3 : 1_000 % 7", {"trig_one": 2, "trig_two": 1}, 8),
    ("abs(trig_one - trig_two) + round(2.5) + round(-2.5)", {"trig_one": 1, "trig_two": 4}, 3),  # Go: half away
]


@pytest.mark.parametrize(("formula", "values", "expected"), CASES)
def test_the_docs_examples_give_what_the_docs_say(formula: str, values: dict[str, float], expected: float) -> None:
    got = compile_formula(formula, NAMES).value({**dict.fromkeys(NAMES, 0.0), **values})
    assert got == expected


REFUSED = {
    "trig_four + 1": "unknown name trig_four",                     # not a named trigger: KEDA's compile fails
    "trig_one > 2": "must give a number, not a boolean",             # expr.AsFloat64
    'trig_one + "1"': "'\"' is not supported",
    "trig_one ?? 1": "'??' is not supported",
    "trig_one.value": "'.' is not supported",
    "trig_one ? 1": "'?' without its ':'",
    "(trig_one + 1": "'(' is not closed",
    "sqrt(trig_one)": "function sqrt() is not supported",
    "": "is empty",
}


@pytest.mark.parametrize("formula", REFUSED)
def test_what_is_refused_says_why(formula: str) -> None:
    with pytest.raises(FormulaError) as info:
        compile_formula(formula, NAMES)
    assert str(info.value).startswith(REFUSED[formula]), str(info.value)


def test_a_division_by_zero_fails_that_evaluation_only() -> None:
    """KEDA checks the formula with every trigger at -1; Go's float division by zero is no error
    there, so it is accepted, and a zero divisor at a polling fails that reading."""
    formula = compile_formula("trig_one / (trig_two + 1)", NAMES)
    assert formula.value({"trig_one": 6, "trig_two": 2}) == 2
    with pytest.raises(FormulaError, match="divides by zero"):
        formula.value({"trig_one": 6, "trig_two": -1})


def test_a_formula_is_copied_by_compiling_it_again() -> None:
    """A spec is copied (and pickled) whole; the formula's evaluator is not: the copy evaluates alike."""
    import copy
    import pickle

    formula = compile_formula("count([trig_one, trig_two], {# > 1})", NAMES)
    for other in (copy.deepcopy(formula), pickle.loads(pickle.dumps(formula))):
        assert other == formula and other.value({"trig_one": 2, "trig_two": 3}) == 2
