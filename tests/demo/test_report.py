"""The report: settle times, the summary's numbers, and a real PNG from the plot."""

from __future__ import annotations

import json

from autoscaler.demo import report
from autoscaler.demo.monitor import ReplicaChange, Sample
from autoscaler.demo.scenario import WEB, WORKER
from kubesim.workloads import LoadChange


def s(t, metric, replicas, target=0.5, load=1.0, served=None):
    return Sample(t=t, load=load, metric=metric, served=served if served is not None else metric, target=target,
                  replicas=replicas, ready=replicas, desired=replicas)


def test_settled_within_tolerance_or_pinned_at_a_bound():
    assert report.settled(s(0, 0.54, 3), 0.1, WEB)
    assert not report.settled(s(0, 0.6, 3), 0.1, WEB)
    assert report.settled(s(0, 0.1, 1), 0.1, WEB)          # at minReplicas, below target: nothing to do
    assert report.settled(s(0, 0.9, 10), 0.1, WEB)         # at maxReplicas, above target
    assert not report.settled(s(0, None, 3), 0.1, WEB)


def test_settle_times_measure_from_change_start_to_three_settled_samples():
    samples = [s(0, 0.5, 2), s(1, 0.5, 2), s(2, 0.9, 2), s(3, 0.8, 4), s(4, 0.52, 4), s(5, 0.6, 4),
               s(6, 0.5, 4), s(7, 0.5, 4), s(8, 0.5, 4), s(9, 0.5, 4), s(10, 0.9, 4)]
    changes = [LoadChange(1, 2, 1.0, 2.0), LoadChange(10, 11, 2.0, 4.0)]
    first, second = report.settle_times(samples, changes, 0.1, WEB)
    assert first["left_tolerance_at"] == 2 and first["back_within_tolerance_at"] == 6 and first["seconds"] == 5
    assert second["left_tolerance_at"] == 10
    assert second["back_within_tolerance_at"] is None and second["seconds"] is None


def test_settle_time_is_zero_when_the_metric_never_left():
    (only,) = report.settle_times([s(t, 0.5, 2) for t in range(5)], [LoadChange(1, 2, 1, 1.1)], 0.1, WEB)
    assert only["seconds"] == 0.0 and only["left_tolerance_at"] is None


def test_summary_has_peaks_changes_and_queue(tmp_path):
    web = [s(0, 0.5, 2), s(1, 0.9, 2), s(2, 0.5, 4), s(3, 0.5, 1)]
    wk = [s(0, 0, 1, target=30, served=0), s(1, 60, 1, target=30, served=60), s(2, 20, 3, target=30, served=60),
          s(3, 0, 3, target=30, served=0)]
    changes = {"web": [ReplicaChange(2, 2, 4, "New size: 4; reason: up"), ReplicaChange(3, 4, 1, "down")],
               "worker": [ReplicaChange(2, 1, 3, "New size: 3")]}
    out = report.summarize([WEB, WORKER], {"web": web, "worker": wk}, changes,
                           {"web": [LoadChange(0.5, 1, 1, 2)], "worker": []}, 0.1, {"duration": 4})
    json.dumps(out)  # JSON-able
    assert out["duration"] == 4
    w = out["workloads"]["web"]
    assert (w["initial_replicas"], w["peak_replicas"], w["final_replicas"]) == (2, 4, 1)
    assert [c["to"] for c in w["replica_changes"]] == [4,
                                                       1] and w["replica_changes"][0]["reason"].startswith("New size")
    assert len(w["timeline"]) == 4 and w["timeline"][1]["metric"] == 0.9
    q = out["workloads"]["worker"]
    assert q["peak_queue"] == 60 and q["final_queue"] == 0


def test_plot_writes_a_png(tmp_path):
    from PIL import Image

    web = [s(t, 0.5 + 0.1 * (t % 3), 2 + t // 4, load=1 + t / 5) for t in range(20)]
    wk = [s(t, 10.0 * (t % 4), 1 + t // 5, target=30, served=30.0 * (t % 4)) for t in range(20)]
    changes = {"web": [ReplicaChange(4, 2, 3, "x"), ReplicaChange(8, 3, 4, "y")],
               "worker": [ReplicaChange(5, 2, 1, "z")]}
    path = tmp_path / "timeline.png"
    report.plot(path, [WEB, WORKER], {"web": web, "worker": wk}, changes,
                {"web": [LoadChange(2, 4, 1, 2)], "worker": [LoadChange(3, 5, 1, 14)]}, 0.1, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as img:
        img.load()
        assert img.size[0] > 1000 and img.size[1] > 700


def test_every_shading_has_a_legend_entry():
    """The load-change bands and the start-up band are explained in a figure legend, and each
    entry has the very colour the bands are drawn with."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba

    web = [s(t, 0.5, 2, load=1 + t / 5) for t in range(3, 20)]
    wk = [s(t, 10.0, 1, target=30, served=30.0) for t in range(3, 20)]
    fig = report.figure([WEB, WORKER], {"web": web, "worker": wk}, {"web": [], "worker": []},
                        {"web": [LoadChange(5, 8, 1, 2)], "worker": [LoadChange(6, 9, 1, 14)]}, 0.1, "test")
    try:
        bands = {to_rgba(p.get_facecolor()) for ax in fig.axes for p in ax.patches}
        (legend,) = fig.legends
        entries = {text.get_text(): handle for text, handle in zip(legend.get_texts(), legend.legend_handles,
                                                                   strict=True)}
        load = next(h for label, h in entries.items() if label.startswith("load changing"))
        startup = next(h for label, h in entries.items() if label.startswith("start-up"))
        assert to_rgba(load.get_facecolor()) in bands and to_rgba(startup.get_facecolor()) in bands
        assert any(label == "scale event" for label in entries)
    finally:
        plt.close(fig)
