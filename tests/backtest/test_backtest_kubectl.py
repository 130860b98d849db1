"""`kubectl promscaler backtest`: the real kubectl runs the plugin, whose `-n` (before or after the
command) names the namespace of a spec that has none, exactly as `backtest -n` does."""

from __future__ import annotations

from pathlib import Path

import yaml

from promscaler.times import parse_time

from ..support import kubectl
from . import data
from .test_backtest import SHORT_EVENTS


def test_backtest_through_kubectl_takes_its_namespace(history, tmp_path: Path):
    prom, start = history
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(data.RULES))
    spec = data.spec("short", 30)
    del spec["metadata"]["namespace"]  # the history is in namespace shop: only -n shop finds it
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump(spec))
    window = ["--from", str(start), "--to", str(start + (data.STEPS - 1) * data.STEP), "--step", "15s",
              "--startup-delay", "15s", "--no-png", "--no-progress"]
    for where in (["-n", "shop", "backtest", str(short)], ["backtest", str(short), "--namespace=shop"]):
        report = tmp_path / f"report-{where[0]}"
        done = kubectl("promscaler", *where, "--prometheus-url", prom.url, "--rules", str(rules), *window,
                       "--report", str(report), home=tmp_path)
        assert done.returncode == 0, done.stderr
        summary = yaml.safe_load((report / "summary.json").read_text())
        (s,) = summary["specs"]
        assert s["metrics"][0]["promql"] == \
            'sum(inflight_requests{namespace="shop",pod=~"web-[a-z0-9]+-[a-z0-9]+"}) by (pod)'
        events = [(round((parse_time(e["time"]).timestamp() - start) / data.STEP), e["from"], e["to"])
                  for e in s["events"]]
        assert events == SHORT_EVENTS  # the hand-computed replay (test_backtest.py)
