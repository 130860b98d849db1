"""`simulate` a CI can trust: strict fields, machine-readable output per file and document, the
worst exit status over several files, `--check` failing without `expect:`, and the short form."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from autoscaler.simulate import main

from .scenario_docs import APP_CPU_50, CPU_50, HITS, NOW, QUEUE, RPS, hpa, valid_scenarios
from .simulate_run import run_doc

CPU, PODS, EXTERNAL, OBJECT = valid_scenarios()


def _main(*args: str) -> tuple[int, str, str]:
    import io
    out, err = io.StringIO(), io.StringIO()
    return main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def _write(tmp_path: Path, name: str, *docs: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


# --- unknown fields anywhere ------------------------------------------------------------------------

TYPOS = [
    (["hpa", "spec"], "behaviour", {}, "hpa.spec.behaviour: unknown field"),
    (["hpa", "spec"], "behavior", {"scaleDown": {"stabilizationWindowSecond": 60}},
     "hpa.spec.behavior.scaleDown.stabilizationWindowSecond: unknown field"),
    (["hpa", "spec", "metrics", 0, "resource"], "targt", {}, "hpa.spec.metrics[0].resource.targt: unknown field"),
    (["hpa", "spec", "metrics", 0, "resource", "target"], "averageUtilisation", 50,
     "hpa.spec.metrics[0].resource.target.averageUtilisation: unknown field"),
    (["pods", 0, "spec", "containers", 0], "resource", {}, "pods[0].spec.containers[0].resource: unknown field"),
    (["pods", 0, "status"], "startedAt", NOW, "pods[0].status.startedAt: unknown field"),
    (["metrics", "resource", 0, "containers", 0], "usages", {},
     "metrics.resource[0].containers[0].usages: unknown field"),
    (["scaleTarget", "status"], "selectors", "app=web", "scaleTarget.status.selectors: unknown field"),
    (["history"], "recomendations", [], "history.recomendations: unknown field"),
    (["config"], "tolerence", 0.2, "config.tolerence: unknown field"),
]


@pytest.mark.parametrize(("where", "key", "value", "message"), TYPOS, ids=[t[3].split(":")[0] for t in TYPOS])
def test_unknown_fields_are_errors_naming_their_path(where, key, value, message):
    doc = copy.deepcopy(CPU)
    doc.setdefault("history", {})
    doc.setdefault("config", {})
    node = doc
    for step in where:
        node = node[step]
    node[key] = value
    rc, out, err = run_doc(doc, "--check")
    assert rc == 2 and out == "" and message in err, err


def test_pasted_kubernetes_objects_keep_their_api_fields():
    doc = copy.deepcopy(CPU)
    for pod in doc["pods"]:
        pod.update(apiVersion="v1", kind="Pod")
        pod["metadata"].update(uid="u", resourceVersion="7", annotations={"a": "b"},
                               ownerReferences=[{"kind": "ReplicaSet"}])
        pod["spec"].update(nodeName="n1", tolerations=[{"operator": "Exists"}])
        pod["spec"]["containers"][0].update(image="nginx", ports=[{"containerPort": 80}])
        pod["status"].update(podIP="10.0.0.1", qosClass="Burstable", containerStatuses=[{"name": "app"}])
    rc, _, err = run_doc(doc, "--check")
    assert rc == 0, err


# --- output for machines, several files ------------------------------------------------------------


def test_json_lines_carry_file_and_document_and_every_file_is_reported(tmp_path):
    one = _write(tmp_path, "one.yaml", CPU)
    two = _write(tmp_path, "two.yaml", PODS, {**EXTERNAL, "colour": "blue"}, OBJECT)
    broken = tmp_path / "broken.yaml"
    broken.write_text("hpa: {spec: [unclosed\n")
    rc, out, err = _main(one, str(broken), two, "-o", "json")
    assert rc == 2
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(line["file"], line["document"], line["desiredReplicas"]) for line in lines] == [
        (one, 1, 6), (two, 1, 6), (two, 3, 4)]
    errors = err.splitlines()
    assert len(errors) == 2 and "broken.yaml: not valid YAML" in errors[0] and f"{two}#2" in errors[1]
    assert "colour: unknown field" in errors[1]


def test_check_as_json_reports_each_scenario_and_the_worst_status(tmp_path):
    failing = copy.deepcopy(PODS)
    failing["expect"]["desiredReplicas"] = 7
    no_expect = copy.deepcopy(EXTERNAL)
    del no_expect["expect"]
    path = _write(tmp_path, "s.yaml", CPU, failing, no_expect)
    rc, out, _ = _main("--check", "-o", "json", path)
    assert rc == 1
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(x["document"], x["result"]) for x in lines] == [(1, "pass"), (2, "fail"), (3, "fail")]
    assert lines[0]["differences"] == [] and lines[0]["file"] == path
    assert lines[1]["differences"] == ["desiredReplicas: expected 7, got 6"]
    assert lines[2]["differences"] == ["no expect: block, nothing to check"]
    invalid = _write(tmp_path, "bad.yaml", {**CPU, "colour": "blue"})
    rc, out, _ = _main("--check", "-o", "json", path, invalid)
    assert rc == 2 and len(out.splitlines()) == 3  # the valid file is still reported in full


def test_check_text_without_expect_fails_saying_so(tmp_path):
    doc = copy.deepcopy(CPU)
    del doc["expect"]
    rc, out, _ = _main("--check", _write(tmp_path, "s.yaml", doc))
    assert rc == 1 and out.strip().endswith("FAILED: no expect: block, nothing to check")


# --- the short form ----------------------------------------------------------------------------------


def _decide_json(doc):
    rc, out, err = run_doc(doc, "-o", "json")
    assert rc == 0, err
    return json.loads(out)


def test_pods_by_count_and_values_per_pod():
    # 3 Ready pods at 750m of 500m = 150% vs 50% -> ratio 3. The 4th started 10 s ago, not Ready:
    # on a scale-up it counts at 0%: 2250 / 2000 = 112% -> ratio 2.24 -> ceil(2.24 x 4) = 9;
    # legacy limit max(2 x 4, 4) = 8.
    doc = {"now": NOW, "hpa": hpa([CPU_50], max_r=20), "pods": {"count": 4, "ready": 3, "cpuRequest": "500m"},
           "metrics": {"cpu": ["750m", "750m", "750m", "100m"]}}
    d = _decide_json(doc)
    assert (d["currentReplicas"], d["recommendation"], d["desiredReplicas"]) == (4, 9, 8)
    assert d["currentMetrics"][0]["resource"]["current"] == {"averageUtilization": 150, "averageValue": "750m"}
    assert "  pods: 3 ready, 1 not yet ready (web-4)" in d["explanation"]


def test_the_short_form_decides_as_its_full_form():
    short = {"now": NOW, "hpa": hpa([APP_CPU_50, RPS], max_r=20), "scaleTarget": {"replicas": 3},
             "pods": {"count": 3, "cpuRequest": "500m"},
             "metrics": {"cpu": ["600m", None, "900m"], "http_requests": "700m"}}
    pods = yaml.safe_load(yaml.safe_dump(valid_scenarios()[0]["pods"]))
    full = {"now": NOW, "hpa": hpa([APP_CPU_50, RPS], max_r=20),
            "scaleTarget": {"spec": {"replicas": 3}, "status": {"replicas": 3, "selector": "app=web"}},
            "pods": pods,
            "metrics": {"resource": [
                {"metadata": {"name": n, "namespace": "default"}, "timestamp": NOW, "window": "30s",
                 "containers": [{"name": "app", "usage": {"cpu": v}}]} for n, v in (("web-1", "600m"),
                                                                                    ("web-3", "900m"))],
                "custom": [{"describedObject": {"kind": "Pod", "name": f"web-{i}", "namespace": "default"},
                            "metricName": "http_requests", "timestamp": NOW, "value": "700m"} for i in (1, 2, 3)]}}
    a, b = _decide_json(short), _decide_json(full)
    for key in ("desiredReplicas", "recommendation", "currentMetrics", "proposals", "conditions"):
        assert a[key] == b[key], key
    # by hand: web-2 has no cpu sample: ready average (600 + 900) / 1000 = 150% -> ratio 3 (up); web-2 at 0%:
    # 1500 / 1500 = 100% -> ratio 2 -> 6. http_requests 700m vs 500m -> 1.4 -> ceil(4.2) = 5. Largest: 6.
    assert [p["replicas"] for p in a["proposals"]] == [6, 5] and a["desiredReplicas"] == 6


@pytest.mark.parametrize(("metric", "values", "replicas"), [
    (QUEUE, 120, 4),                       # 120 / 30 per pod = 4 (status.replicas 2: 120 / 60 = 2.0)
    (QUEUE, [100, 20], 4),                 # two series: the External metric sums them
    (HITS, 20, 4),                         # Object Value 20 vs 10: ratio 2 x 2 ready pods
    (RPS, ["1500m", None], 3),             # 1.5 vs 0.5: ratio 3 (up); the pod without one at 0: 0.75 -> 1.5 x 2 = 3
])
def test_totals_and_series_in_the_short_form(metric, values, replicas):
    name = (metric.get("external") or metric.get("object") or metric.get("pods"))["metric"]["name"]
    doc = {"now": NOW, "hpa": hpa([metric]), "pods": {"count": 2}, "metrics": {name: values}}
    d = _decide_json(doc)
    assert d["currentReplicas"] == 2 and d["desiredReplicas"] == replicas, d["explanation"]


@pytest.mark.parametrize(("change", "message"), [
    ({"metrics": {"cpu": ["1", "1"]}}, "metrics.cpu: 2 values for 3 pods"),
    ({"metrics": {"cpu": ["1", "lots", "1"]}}, "metrics.cpu[1]: not a quantity"),
    ({"metrics": {"memory": 5}}, "metrics.memory: unknown field"),
    ({"pods": {"ready": 1}}, "pods.count: required"),
    ({"pods": {"count": 3, "ready": 4}}, "pods.ready: must be less than or equal to 3"),
    ({"pods": {"count": 3, "colour": "blue"}}, "pods.colour: unknown field"),
    ({"pods": {"count": 10**6}}, "pods.count: must be less than or equal to 100000"),
])
def test_short_form_errors_name_the_field(change, message):
    doc = {"now": NOW, "hpa": hpa([CPU_50]), "pods": {"count": 3, "cpuRequest": "1"}, "metrics": {"cpu": "1"}}
    doc.update(change)
    rc, _, err = run_doc(doc)
    assert rc == 2 and message in err, err


def test_short_form_writes_what_decides_the_same():
    from autoscaler.simulate.shorten import short_form

    for doc in valid_scenarios():
        short = short_form(doc)
        assert isinstance(short["pods"], dict) and short["pods"]["count"] == len(doc["pods"]), short
        assert _decide_json(short)["desiredReplicas"] == _decide_json(doc)["desiredReplicas"]
    cpu = copy.deepcopy(CPU)
    assert short_form(cpu)["metrics"] == {"cpu": ["750m", "750m", "750m"]}
    assert short_form(cpu)["pods"] == {"count": 3, "ready": 3, "cpuRequest": "500m"}
    # A pod that started 30 s ago and is Ready: its CPU sample is set aside in the full form (inside
    # the initialization period, one window not yet passed) but would count in the short form: kept full.
    cpu["pods"][2]["status"]["startTime"] = "2026-01-01T00:09:30Z"
    cpu["pods"][2]["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:09:30Z"
    cpu["metrics"]["resource"][2]["containers"][0]["usage"]["cpu"] = "100m"
    assert short_form(cpu) == cpu
