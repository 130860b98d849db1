"""Label selectors: apimachinery's string grammar and LabelSelector objects."""

import pytest

from promscaler.selectors import Operator, SelectorError, from_label_selector, parse_selector, to_label_selector


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("app=web", "app=web"),
        ("app==web", "app=web"),
        ("app!=web", "app!=web"),
        ("env in (prod, staging)", "env in (prod,staging)"),
        ("env notin (a,b)", "env notin (a,b)"),
        ("canary", "canary"),
        ("!canary", "!canary"),
        ("replicas>5", "replicas>5"),
        ("replicas<5", "replicas<5"),
        ("example.com/tier=front,app=web", "app=web,example.com/tier=front"),
        ("a=", "a="),
        ("", ""),
    ],
)
def test_parse_canonical(text, canonical):
    assert str(parse_selector(text)) == canonical


@pytest.mark.parametrize(
    "bad",
    ["app=web,", "=web", "app in web", "app in (a", "app=web extra", "a b", 'app="x"', "app=a\\b",
     "app=a}", "k>x", "!", "a,,b", "app=" + "x" * 64, "-bad=x", "app in (a b)"],
)
def test_parse_rejects(bad):
    with pytest.raises(SelectorError):
        parse_selector(bad)


@pytest.mark.parametrize(
    "text, labels, expected",
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "api"}, False),
        ("app=web", {}, False),
        ("app!=web", {}, True),              # != matches a missing key, as in Kubernetes
        ("app notin (a,b)", {"app": "c"}, True),
        ("app notin (a,b)", {"app": "a"}, False),
        ("app in (a,b)", {"app": "b"}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": ""}, False),
        ("n>5", {"n": "6"}, True),
        ("n>5", {"n": "5"}, False),
        ("n<5", {"n": "x"}, False),
        ("a=1,b=2", {"a": "1", "b": "2"}, True),
        ("a=1,b=2", {"a": "1"}, False),
        ("", {"anything": "x"}, True),
    ],
)
def test_matches(text, labels, expected):
    assert parse_selector(text).matches(labels) is expected


def test_label_selector_object():
    sel = from_label_selector(
        {"matchLabels": {"queue": "w"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}
    )
    assert {(r.key, r.operator) for r in sel.requirements} == {("queue", Operator.EQUALS), ("env", Operator.NOT_IN)}
    assert sel.matches({"queue": "w", "env": "prod"})
    assert not sel.matches({"queue": "w", "env": "dev"})
    assert from_label_selector(None).empty()


@pytest.mark.parametrize(
    "obj, fragment",
    [
        ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}, "matchExpressions[0].operator"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "matchExpressions[0]"),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "at least one value"),
        ({"matchLabels": {"a": 1}}, "matchLabels['a']"),
        ({"matchLabel": {"a": "b"}}, "unknown selector field"),
    ],
)
def test_label_selector_object_errors(obj, fragment):
    with pytest.raises(
        SelectorError, match=r".*" + fragment.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
    ):
        from_label_selector(obj)


@pytest.mark.parametrize("text", ["app=web", "a=1,b notin (x,y),!c,d", "env in (prod,staging),tier!=db"])
def test_to_label_selector_round_trips(text):
    sel = parse_selector(text)
    assert from_label_selector(to_label_selector(sel)).matches(
        {"app": "web", "a": "1", "d": "", "env": "prod"}
    ) == sel.matches({"app": "web", "a": "1", "d": "", "env": "prod"})
    # != is NotIn with one value: same meaning, object form
    assert str(from_label_selector(to_label_selector(sel))) == str(sel).replace("tier!=db", "tier notin (db)")


def test_to_label_selector_empty():
    assert to_label_selector(parse_selector("")) is None


def test_pinned_names_the_first_single_valued_equality():
    assert parse_selector("tier!=db,app in (web),env=prod").pinned() == ("app", "web")
    assert parse_selector("app in (web,api),!canary").pinned() is None
    assert parse_selector("").pinned() is None
