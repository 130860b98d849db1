"""Benchmark: `autoscaler simulate` on a large scenario (20,000 pods, a CPU metric, full form).

The file is written in block-style YAML as `kubectl get -o yaml` writes objects (about 10 MB, more
than the 7 MB of issue 11's report). Goal: loaded, validated and decided in under 10 s of CPU.
Writes bench/results/simulate.json.

    python bench/simulate_bench.py [--pods 20000]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoscaler.simulate import main

GOAL_SECONDS = 10.0


def scenario(pods: int) -> dict:
    def pod(i: int) -> dict:
        return {"metadata": {"name": f"web-{i}", "namespace": "default", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]},
                "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:20Z"}]}}

    def usage(i: int) -> dict:
        return {"metadata": {"name": f"web-{i}", "namespace": "default"}, "timestamp": "2026-01-01T00:09:45Z",
                "window": "30s", "containers": [{"name": "app", "usage": {"cpu": f"{400 + i % 400}m"}}]}

    return {
        "now": "2026-01-01T00:10:00Z",
        "hpa": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                         "minReplicas": 1, "maxReplicas": 100_000, "metrics": [
                             {"type": "Resource", "resource": {"name": "cpu", "target": {
                                 "type": "Utilization", "averageUtilization": 50}}}]}},
        "scaleTarget": {"spec": {"replicas": pods}, "status": {"replicas": pods, "selector": "app=web"}},
        "pods": [pod(i) for i in range(pods)],
        "metrics": {"resource": [usage(i) for i in range(pods)]},
    }


def main_() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=20_000)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "simulate.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "large.yaml"
        path.write_text(yaml.safe_dump(scenario(args.pods), sort_keys=False))
        size = path.stat().st_size
        out, err = io.StringIO(), io.StringIO()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rc = main([str(path), "-o", "json"], stdout=out, stderr=err)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    decision = json.loads(out.getvalue())
    result = {
        "benchmark": "autoscaler simulate on a large scenario",
        "pods": args.pods, "file_mb": round(size / 1e6, 1), "exit": rc,
        "cpu_seconds": round(cpu, 2), "wall_seconds": round(wall, 2),
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "decision": {"current": decision["currentReplicas"], "desired": decision["desiredReplicas"]},
        "goal_seconds": GOAL_SECONDS, "goal_met": rc == 0 and cpu < GOAL_SECONDS,
        "python": platform.python_version(), "yaml_loader": "libyaml" if yaml.__with_libyaml__ else "pure Python",
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    verdict = "meets" if result["goal_met"] else "misses"
    print(f"simulate: {args.pods:,} pods, {result['file_mb']} MB: {cpu:.1f} s CPU ({wall:.1f} s wall), "
          f"{result['max_rss_mb']} MB RSS; {verdict} the goal of {GOAL_SECONDS:.0f} s  -> {args.out}")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main_())
