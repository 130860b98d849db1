"""One exposure: `backtest` and `tune` measure the seconds under-provisioned against one reference
(the baseline's: tune's given spec, backtest's first), so the backtest of a tune recommendation
reads tune's own figure.

History (15 s apart, a per-pod gauge over 4 pods of `web`, so every value is exact): the total load
is 100 for 20 steps, then 130 for 20 steps, and the same again (80 steps, 20 minutes). The given
spec is test_tune's (target 12 per pod, a 30-minute scale-down window, 1 pod per 10 minutes down).
No reference flag: the reference is the given spec's target and scale-up tolerance (the default
0.1), a band of 12 x 1.1 = 13.2 per pod. Replays start at 20 replicas; new pods are ready at the
next step; the budget is 0 s under-provisioned.

By hand: 9 pods or fewer at the load of 100 (a target above 100 / 9 = 11.1: 11.4 or 12) leave
130 / 9 = 14.4 > 13.2 on each pod at the rise: over the budget. 10 pods (a target of 10.2 or 10.8:
ceil(100 / 10.2) = ceil(100 / 10.8) = 10) carry 130 / 10 = 13 <= 13.2, then scale to
ceil(130 / 10.2) = ceil(130 / 10.8) = 13: never under-provisioned, for the fewest replica-hours
(from 20 to 10 pods at the first step: 10 x 20 + 13 x 20 pod-steps on the chosen-on half). The
recommended target's own band is below 13 (10.2 x 1.1 = 11.22, 10.8 x 1.1 = 11.88): judged against
its own target, as backtest did before, the same replay is under-provisioned 15 s at each rise.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from autoscaler.backtest import cli, tunecli
from kubesim.prometheus import PrometheusServer, start_backfilled
from promscaler.quantity import to_milli

from .tunedata import GIVEN, NS, RULES, STEP

LOAD = ([100] * 20 + [130] * 20) * 2
HALF = 40


@pytest.fixture(scope="module")
def small_rises() -> Iterator[tuple[PrometheusServer, int]]:
    start = (int(time.time()) - 7200) // STEP * STEP
    lines = ["# TYPE busy_workers gauge"]
    for i, total in enumerate(LOAD):
        lines += [f'busy_workers{{namespace="{NS}",pod="web-7c9d8f6b5-x2x7{p}"}} {total / 4} {start + i * STEP}'
                  for p in range(4)]
    prom = start_backfilled("\n".join([*lines, "# EOF"]) + "\n")
    yield prom, start
    prom.close()


def _flags(history: tuple[PrometheusServer, int], tmp_path: Path, steps: int) -> list[str]:
    prom, start = history
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(RULES))
    return ["--prometheus-url", prom.url, "--rules", str(tmp_path / "rules.yaml"), "--from", str(start),
            "--to", str(start + (steps - 1) * STEP), "--startup-delay", "15s", "--initial-replicas", "20",
            "--no-png"]


def _backtest(history, tmp_path: Path, specs: list[Path], steps: int, *extra: str) -> tuple[dict, str]:
    out, err = io.StringIO(), io.StringIO()
    report = tmp_path / f"backtest-{len(list(tmp_path.glob('backtest-*')))}"
    code = cli.main([*map(str, specs), *_flags(history, tmp_path, steps), "--report", str(report), "--no-html",
                     *extra], out, err)
    assert code == 0, err.getvalue()
    return json.loads((report / "summary.json").read_text()), out.getvalue()


def _tune(history: tuple[PrometheusServer, int], tmp_path: Path, budget: str) -> tuple[Path, dict, str]:
    """tune of the given spec (written to web.yaml) over the whole range with --max-above-target
    `budget`, its report in tmp_path / "tune": the spec's path, tune.json and what tune printed."""
    given = tmp_path / "web.yaml"
    given.write_text(yaml.safe_dump(GIVEN))
    out, err = io.StringIO(), io.StringIO()
    code = tunecli.main([str(given), *_flags(history, tmp_path, len(LOAD)), "--max-above-target", budget,
                         "--report", str(tmp_path / "tune"), "--workers", "1", "--no-html"], out, err)
    assert code == 0, err.getvalue()
    return given, json.loads((tmp_path / "tune" / "tune.json").read_text()), out.getvalue()


def test_the_backtest_of_a_recommendation_reads_tune_s_figure(small_rises, tmp_path: Path):
    given, tune, tune_text = _tune(small_rises, tmp_path, "0%")
    recommended = tmp_path / "tune" / "recommended.yaml"
    target = yaml.safe_load(recommended.read_text())["spec"]["metrics"][0]["pods"]["target"]["averageValue"]
    # tune's choice, by hand: 10 pods at 100, 13 at 130, never under-provisioned
    assert tune["recommended"] and to_milli(target) in (10200, 10800)
    chosen = tune["best"]["chosenOn"]
    assert chosen["secondsUnderProvisioned"] == 0
    assert chosen["replicaHours"] == round((10 * 20 + 13 * 20) * STEP / 3600, 3)

    # backtest, the given spec first (the baseline), on the part tune chose on: tune's figures
    summary, text = _backtest(small_rises, tmp_path, [given, recommended], HALF)
    base, rec = summary["specs"]
    assert rec["exposure"]["secondsUnderProvisioned"] == chosen["secondsUnderProvisioned"] == 0
    assert rec["replicaHours"] == chosen["replicaHours"]
    assert base["exposure"]["secondsUnderProvisioned"] == tune["given"]["chosenOn"]["secondsUnderProvisioned"]
    assert rec["exposure"]["referenceTarget"] == base["exposure"]["referenceTarget"] == 12
    assert "per ready pod above 12 x (1 + 0.1) = 13.2 (web.yaml (web)'s first metric's target" in text
    # its own figure: the engine saw 13 per pod above the recommended target's own band at the rise
    assert rec["secondsAboveOwnTargets"] == 15
    # the reference is named, and it is the given spec's, for tune as for backtest
    assert {k: tune["reference"][k] for k in ("metric", "target", "tolerance", "from", "flags")} == {
        "metric": "Pods busy_workers", "target": 12.0, "tolerance": 0.1,
        "from": "web.yaml (web)'s first metric's target and scale-up tolerance",
        "flags": ["--reference-target", "12", "--reference-tolerance", "0.1"]}
    assert summary["reference"] == {k: tune["reference"][k] for k in ("metric", "target", "tolerance", "from")}
    assert "per ready pod above 12 x (1 + 0.1) = 13.2" in tune_text
    assert tune["reference"]["backtest"].startswith("backtest web.yaml recommended.yaml with the same flags")
    assert "to read the same in backtest: backtest" in tune_text

    # over the whole range: the chosen-on and the held-out parts together
    summary, _ = _backtest(small_rises, tmp_path, [given, recommended], len(LOAD))
    assert summary["specs"][1]["exposure"]["secondsUnderProvisioned"] == \
        chosen["secondsUnderProvisioned"] + tune["best"]["reportedOn"]["secondsUnderProvisioned"] == 0

    # the recommended spec alone with the reference's flags: the same figure
    summary, _ = _backtest(small_rises, tmp_path, [recommended], HALF, *tune["reference"]["flags"])
    assert summary["specs"][0]["exposure"]["secondsUnderProvisioned"] == 0
    assert summary["reference"]["from"] == "--reference-target and --reference-tolerance"
    # alone without them, it is its own baseline: judged against its own band, 15 s at the rise
    summary, _ = _backtest(small_rises, tmp_path, [recommended], HALF)
    assert summary["specs"][0]["exposure"]["referenceTarget"] == to_milli(target) / 1000
    assert summary["specs"][0]["exposure"]["secondsUnderProvisioned"] == 15


def test_one_reference_for_every_spec_and_its_flags(small_rises, tmp_path: Path):
    """backtest of target 12 then target 10, each with a fast scale-down, both against 12 x 1.1 (the first's).
    Target 12 has 9 pods at 100 (11.1 per pod), 130 / 9 = 14.4 at the rise (one step), then 11 (11.8 per pod);
    target 10 has 10 pods (10 per pod), 13 at the rise (one step), then 13 (10 per pod). Target 10 first: the
    band is 11 for both, and target 12 is above it at every step but the first (20 pods). With
    --reference-tolerance 0 the band is 12: one step each."""
    def spec(name: str, target: str) -> Path:
        raw = json.loads(json.dumps(GIVEN))
        raw["metadata"]["name"] = name
        raw["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = target
        raw["spec"]["behavior"]["scaleDown"] = {"stabilizationWindowSeconds": 0,
                                                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(raw))
        return path

    twelve, ten = spec("twelve", "12"), spec("ten", "10")
    summary, _ = _backtest(small_rises, tmp_path, [twelve, ten], HALF)
    assert [s["exposure"]["secondsUnderProvisioned"] for s in summary["specs"]] == [15, 0]
    assert summary["reference"]["target"] == 12
    summary, _ = _backtest(small_rises, tmp_path, [ten, twelve], HALF)
    assert [s["exposure"]["secondsUnderProvisioned"] for s in summary["specs"]] == [15, (HALF - 1) * STEP]
    summary, _ = _backtest(small_rises, tmp_path, [twelve, ten], HALF, "--reference-tolerance", "0")
    assert [s["exposure"]["secondsUnderProvisioned"] for s in summary["specs"]] == [15, 15]
    assert summary["reference"]["from"] == "--reference-tolerance and twelve.yaml (twelve)'s first metric's target"
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([str(twelve), *_flags(small_rises, tmp_path, HALF), "--reference-tolerance", "-1",
                     "--report", str(tmp_path / "bad")], out, err)
    assert code == 2 and err.getvalue().count("\n") == 1 and "--reference-tolerance" in err.getvalue()


def test_over_tune_s_whole_range_its_two_parts_add_up(small_rises, tmp_path: Path):
    """With a budget of 5% (30 s a half, chosen within 70% of it: one step), target 12 with a fast
    scale-down is cheapest: 9 pods at 100 (11.1 per pod), 130 / 9 = 14.4 above 13.2 for the step before
    11 pods are ready (11.8): 15 s at each rise, one rise a half. backtest reads 15 s on the chosen-on
    half and 30 s over both, tune's two figures added."""
    given, tune, _ = _tune(small_rises, tmp_path, "5%")
    best = tune["best"]
    assert tune["recommended"] and best["chosenOn"]["secondsUnderProvisioned"] == 15
    assert best["chosenOn"]["replicaHours"] == round((9 * 20 + 11 * 20) * STEP / 3600, 3)
    recommended = tmp_path / "tune" / "recommended.yaml"
    summary, _ = _backtest(small_rises, tmp_path, [given, recommended], HALF)
    assert summary["specs"][1]["exposure"]["secondsUnderProvisioned"] == 15
    summary, _ = _backtest(small_rises, tmp_path, [given, recommended], len(LOAD))
    assert summary["specs"][1]["exposure"]["secondsUnderProvisioned"] == \
        best["chosenOn"]["secondsUnderProvisioned"] + best["reportedOn"]["secondsUnderProvisioned"] == 30
