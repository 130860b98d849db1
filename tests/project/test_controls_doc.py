"""docs/controls.md: every example is a HorizontalAutoscaler the CRD admits (its schema and CEL
rules, on kubesim's admission with a real CEL evaluator) and the controller parses with the
controls it shows; the alert it names is the chart's (its links: test_links.py)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from autoscaler.decision import parse_spec
from autoscaler.decision.controls import parse_pause
from kubesim.admission import admit

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "controls.md").read_text()
CRD = yaml.safe_load((ROOT / "apiservice" / "horizontalautoscaler-crd.yaml").read_text())


def examples() -> list[dict]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", DOC, re.DOTALL)]


def test_every_example_is_admitted_and_parsed_with_its_control() -> None:
    docs = examples()
    assert len(docs) == 5  # one per control, and scale to zero without one
    seen = set()
    for doc in docs:
        assert doc["kind"] == "HorizontalAutoscaler"
        admitted = admit(CRD, "v1alpha1", copy.deepcopy(doc))
        spec = parse_spec(admitted["spec"], "spec")
        if parse_pause(doc.get("kind"), doc["metadata"].get("annotations")) is not None:
            seen.add("pause")
        if spec.controls is not None:
            c = spec.controls
            seen |= {name for name, on in (("fallback", c.fallback), ("schedules", c.schedules),
                                           ("activation", c.activates)) if on}
    assert seen == {"pause", "fallback", "schedules", "activation"}


def test_the_alert_is_the_charts() -> None:
    assert "PromscalerAutoscalerInFallback" in DOC
    assert "PromscalerAutoscalerInFallback" in (ROOT / "charts/promscaler/files/alerts.yaml").read_text()
