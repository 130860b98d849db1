"""Benchmark: report.html of a 14-day backtest at a 15 s step (80,640 decisions per spec) with 3
specs, opened from disk in Debian's Chromium (headless, Playwright): the file's size, the time
from navigation to every chart drawn, and the time per frame while panning a one-day window.

History and specs: bench/backtest_bench.py's (a daily wave with spikes over 6 pods, a queue gauge,
kube-state-metrics' replicas), backfilled into a real Prometheus; the third spec scales down after
60 s, so it makes the most scale events. Writes bench/results/report.json.

    python bench/report_bench.py [--days 14]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import backtest_bench as bb  # noqa: E402

from autoscaler.backtest import cli  # noqa: E402
from kubesim.prometheus import start_backfilled  # noqa: E402
from tests.support import chromium_page  # noqa: E402

PANS = 40

MEASURE = """async pans => {
  const r = window.report, [t0] = r.charts[0].data[0];
  const points = r.charts.map(u => u.data[0].length);
  const events = r.charts.map(u => u.data.at(-1).filter(v => v != null).length);
  r.zoom(t0, t0 + 86400);
  await new Promise(f => requestAnimationFrame(f));
  const start = performance.now();
  for (let i = 0; i < pans; i++) { r.pan(0.1); await new Promise(f => requestAnimationFrame(f)); }
  const panFrameMs = (performance.now() - start) / pans;
  const t1 = performance.now();
  for (let i = 0; i < pans; i++) r.pan(0.1);
  return {drawnMs: r.drawnAt, panFrameMs, panMs: (performance.now() - t1) / pans, points, events};
}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=14.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "report.json"))
    ap.add_argument("--keep", metavar="PATH", help="keep a copy of the report.html measured")
    args = ap.parse_args()
    steps = int(args.days * 86400 / bb.STEP)
    start = (int(time.time()) - int(args.days * 86400) - 3600) // bb.STEP * bb.STEP
    prom = start_backfilled(bb.openmetrics(start, steps))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            (d / "rules.yaml").write_text(yaml.safe_dump(bb.RULES))
            specs = {"pods": ([bb.PODS_METRIC], 300), "both": ([bb.PODS_METRIC, bb.EXTERNAL_METRIC], 600),
                     "quick": ([bb.PODS_METRIC], 60)}
            for name, (metrics, window) in specs.items():
                (d / f"{name}.yaml").write_text(yaml.safe_dump(bb.spec("web", metrics, window)))
            argv = [*(str(d / f"{name}.yaml") for name in specs), "--prometheus-url", prom.url,
                    "--rules", str(d / "rules.yaml"), "--from", str(start), "--to", str(start + (steps - 1) * bb.STEP),
                    "--step", f"{bb.STEP}s", "--report", str(d / "report"), "--no-progress", "--no-png"]
            out = io.StringIO()
            t0 = time.perf_counter()
            if cli.main(argv, out, sys.stderr) != 0:
                print(out.getvalue())
                return 1
            backtest = time.perf_counter() - t0
            page_path = d / "report" / "report.html"
            size = page_path.stat().st_size
            if args.keep:
                Path(args.keep).write_bytes(page_path.read_bytes())
            with chromium_page() as (page, errors, requests):
                t1 = time.perf_counter()
                page.goto(page_path.as_uri())
                page.wait_for_function("window.report && window.report.ready", timeout=120_000, polling=10)
                wall = time.perf_counter() - t1
                measured = page.evaluate(MEASURE, PANS)
            assert not errors and not requests, (errors, requests)
    finally:
        prom.close()
    result = {
        "benchmark": "report", "days": args.days, "step_seconds": bb.STEP, "specs": len(specs),
        "steps_per_spec": steps, "html_bytes": size, "drawn_ms_from_navigation": round(measured["drawnMs"], 1),
        "goto_to_drawn_seconds": round(wall, 3), "pan_frame_ms": round(measured["panFrameMs"], 1),
        "pan_work_ms": round(measured["panMs"], 1),
        "points_per_series": measured["points"], "scale_events": measured["events"],
        "backtest_seconds_not_counted": round(backtest, 1),
        "machine": platform.machine(), "python": platform.python_version(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"report.html: {args.days:g} days at {bb.STEP}s, {len(specs)} specs x {steps:,} steps: "
          f"{size / 1e6:.2f} MB; drawn {measured['drawnMs']:.0f} ms after navigation "
          f"({wall:.2f} s from goto); panning a day: {measured['panFrameMs']:.1f} ms per frame "
          f"({measured['panMs']:.1f} ms of work per pan); "
          f"points per series {measured['points']}, scale events {measured['events']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
