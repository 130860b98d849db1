/* report.html for promscaler's backtest and tune: draws the inline data (#report-data) with uPlot.
   window.report exposes the charts and the zoom for people and for the browser tests. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const root = document.getElementById("report");
  const report = window.report = { charts: [], ready: false, drawnAt: null };
  document.getElementById("subtitle").textContent = data.subtitle || "";

  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    for (const k of kids) e.append(k);
    return e;
  }
  const iso = t => new Date(t * 1000).toISOString().replace(".000Z", "Z");
  const width = () => Math.max(600, Math.min(1600, (root.clientWidth || 1000) - 10));

  // ready once every chart has drawn once: the time to a drawn page (bench/report_bench.py)
  let pending = 0;
  function drawnOnce() {
    let done = false;
    pending++;
    return () => {
      if (done) return;
      done = true;
      if (--pending === 0) {
        report.ready = true;
        report.drawnAt = performance.now();
        document.body.dataset.ready = "1";
      }
    };
  }

  function table(heads, rows, className) {
    const t = el("table", { className });
    t.append(el("tr", {}, ...heads.map(h => el("th", { textContent: h }))));
    for (const r of rows) t.append(el("tr", {}, ...r.map(c => el("td", { textContent: c == null ? "-" : String(c) }))));
    return t;
  }

  // the last event at or before time t (binary search over the sorted events)
  function nearest(events, t) {
    let lo = 0, hi = events.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (events[mid].t <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  // What a chart draws of `spec` between times min and max: every step while there are no more
  // than data.buckets of them in view; beyond, buckets of ceil(steps / data.buckets) steps
  // (aligned on multiples of that size), each keeping its first step and every series' lowest and
  // highest, plus every scale event's step. The last array marks the events at their new count.
  function view(spec, min, max) {
    const { start, step } = spec, n = spec.series[0].values.length, cols = spec.series.map(s => s.values);
    const i0 = Math.max(0, Math.floor((min - start) / step) - 1);
    const i1 = Math.min(n - 1, Math.ceil((max - start) / step) + 1);
    const keep = new Uint8Array(Math.max(0, i1 - i0 + 1));
    if (i1 - i0 + 1 <= data.buckets) keep.fill(1);
    else {
      const every = Math.ceil((i1 - i0 + 1) / data.buckets);
      for (let b = Math.floor(i0 / every) * every; b <= i1; b += every) {
        const lo = Math.max(b, i0), hi = Math.min(b + every - 1, i1);
        keep[lo - i0] = 1;
        for (const v of cols) {
          let low = -1, high = -1;
          for (let i = lo; i <= hi; i++) {
            const x = v[i];
            if (x == null) continue;
            if (low < 0 || x < v[low]) low = i;
            if (high < 0 || x > v[high]) high = i;
          }
          if (low >= 0) { keep[low - i0] = 1; keep[high - i0] = 1; }
        }
      }
      for (const e of spec.events) if (e.i >= i0 && e.i <= i1) keep[e.i - i0] = 1;
    }
    const marks = new Map(spec.events.map(e => [e.i, e.to]));
    const out = [[], ...cols.map(() => []), []];
    for (let k = 0; k < keep.length; k++) {
      if (!keep[k]) continue;
      const i = i0 + k;
      out[0].push(start + i * step);
      cols.forEach((v, c) => out[c + 1].push(v[i]));
      out[cols.length + 1].push(marks.has(i) ? marks.get(i) : null);
    }
    return out;
  }

  // a forecast panel has no scale events: its chart has no marker series
  const dataOf = (spec, min, max) => spec.text === undefined ? view(spec, min, max) : view(spec, min, max).slice(0, -1);

  function backtest() {
    root.append(table(["", ...data.table.heads], data.table.rows, "summary"));
    if (data.reference) root.append(el("p", { id: "reference", textContent: data.reference }));
    const ends = data.specs.flatMap(s => [s.start, s.start + (s.series[0].values.length - 1) * s.step]);
    const full = [Math.min(...ends), Math.max(...ends)];
    const specs = [];
    // every chart to [min, max] (kept within the history), each with what it draws there
    function zoom(min, max) {
      const span = max - min;
      if (span >= full[1] - full[0]) { min = full[0]; max = full[1]; }
      else if (min < full[0]) { min = full[0]; max = min + span; }
      else if (max > full[1]) { max = full[1]; min = max - span; }
      report.charts.forEach((u, n) => {
        u.setData(dataOf(specs[n], min, max), false);
        u.setScale("x", { min, max });
      });
    }
    function pan(share) {
      const { min, max } = report.charts[0].scales.x;
      zoom(min + (max - min) * share, max + (max - min) * share);
    }
    // a selection dragged across a chart: every chart to its span, the selection cleared
    function zoomToSelection(u) {
      const { left, width: w } = u.select;
      if (w < 2) return;
      const min = u.posToVal(left, "x"), max = u.posToVal(left + w, "x");
      u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      zoom(min, max);
    }
    // every chart's cursor: one time axis for all; a drag selects (zoomToSelection), a double click resets
    function cursor() {
      return {
        sync: { key: "backtest" },
        drag: { x: true, y: false, setScale: false },
        bind: { dblclick: () => () => { report.reset(); return null; } },
      };
    }
    report.zoom = zoom;
    report.pan = pan;
    report.reset = () => zoom(full[0], full[1]);
    report.specs = data.specs;
    root.append(el("div", { className: "controls" },
      el("button", { textContent: "◀ pan", onclick: () => pan(-0.5) }),
      el("button", { textContent: "pan ▶", onclick: () => pan(0.5) }),
      el("button", { textContent: "reset zoom", onclick: () => report.reset() }),
      el("span", { textContent: " drag across a chart to zoom in, the mouse wheel to zoom in or out, a double click to " +
        "see it all; every row shares the time axis. Red: load per ready pod above the reference; green: each " +
        "metric's target ± tolerance." })));

    data.specs.forEach((spec, n) => {
      specs.push(spec);
      const panel = el("div", { className: "explain", id: `explain-${n}`,
        textContent: "hover over (or click) a scale event marker to see the engine's reasons for it" });
      const box = el("div", { className: "chart", id: `chart-${n}` });
      root.append(el("h2", { textContent: spec.label }), box, panel);
      const colors = ["#111", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"];
      const series = [{ label: "time" }];
      spec.series.forEach((s, k) => {
        const replicas = s.scale === "replicas", actual = s.label.startsWith("actual");
        series.push({
          label: s.label, scale: s.scale, width: replicas ? 2 : 1, spanGaps: false, points: { show: false },
          stroke: replicas ? (actual ? "#888" : "#1f77b4") : colors[k % colors.length],
          dash: actual ? [6, 4] : undefined,
          paths: replicas ? uPlot.paths.stepped({ align: 1 }) : undefined,
        });
      });
      series.push({ label: "scale events", scale: "replicas", stroke: "#e08a00", width: 0, paths: () => null,
        points: { show: true, size: 9, width: 1, fill: "#e08a00", stroke: "#7a4b00" } });
      const loadTop = Math.max(0, ...spec.bands.map(b => b.hi), spec.reference ? spec.reference.value : 0);

      function show(e) {
        panel.textContent = `${iso(e.t)}: scale from ${e.from} to ${e.to} replicas\n` + e.lines.join("\n");
        panel.dataset.event = String(e.t);
      }
      function eventNear(u, left, px) {
        if (!spec.events.length || left == null || left < 0) return null;
        const i = nearest(spec.events, u.posToVal(left, "x"));
        let best = null, bestPx = px;
        for (const j of [i, i + 1]) {
          const e = spec.events[j];
          if (!e) continue;
          const d = Math.abs(u.valToPos(e.t, "x") - left);
          if (d <= bestPx) { best = e; bestPx = d; }
        }
        return best;
      }
      function shade(u) {
        const ctx = u.ctx, { left, top, width: w, height: h } = u.bbox, { min, max } = u.scales.x;
        ctx.save();
        ctx.beginPath();
        ctx.rect(left, top, w, h);
        ctx.clip();
        ctx.fillStyle = "rgba(44,160,44,0.14)";
        for (const b of spec.bands) {
          const y0 = u.valToPos(b.hi, "load", true), y1 = u.valToPos(b.lo, "load", true);
          ctx.fillRect(left, y0, w, y1 - y0);
        }
        ctx.fillStyle = "rgba(214,39,40,0.2)";
        for (const [a, b] of spec.under) {
          if (b < min || a > max) continue;
          const x0 = u.valToPos(a, "x", true), x1 = u.valToPos(b, "x", true);
          ctx.fillRect(x0, top, Math.max(1, x1 - x0), h);
        }
        if (spec.reference) {
          const y = u.valToPos(spec.reference.value, "load", true);
          ctx.strokeStyle = "#d62728";
          ctx.setLineDash([3, 3]);
          ctx.beginPath();
          ctx.moveTo(left, y);
          ctx.lineTo(left + w, y);
          ctx.stroke();
        }
        ctx.restore();
      }
      const drawn = drawnOnce();
      const u = new uPlot({
        width: width(), height: 300,
        cursor: cursor(),
        scales: {
          x: { time: true },
          load: { range: (u, min, max) => [0, Math.max(max || 0, loadTop) * 1.08 || 1] },
          replicas: { range: (u, min, max) => [0, Math.max(1, max || 0) + 1] },
        },
        axes: [{}, { scale: "load", label: "load per pod", size: 60 },
          { scale: "replicas", side: 1, label: "replicas", grid: { show: false } }],
        series,
        hooks: {
          drawClear: [shade],
          draw: [drawn],
          setSelect: [zoomToSelection],
          setCursor: [u => { const e = eventNear(u, u.cursor.left, 8); if (e) show(e); }],
        },
      }, view(spec, full[0], full[1]), box);
      u.over.addEventListener("click", () => { const e = eventNear(u, u.cursor.left, 20); if (e) show(e); });
      u.over.addEventListener("wheel", ev => {
        ev.preventDefault();
        const { min, max } = u.scales.x, t = u.posToVal(ev.offsetX, "x"), f = ev.deltaY < 0 ? 0.75 : 1 / 0.75;
        zoom(t - (t - min) * f, t + (max - t) * f);
      }, { passive: false });
      report.charts.push(u);
      spec.forecasts.forEach((f, k) => forecast(f, `forecast-${n}-${k}`));
    });

    // a forecast beside the load it forecast: at each t, its value made then and the load that came
    // at t + horizon (the two lines meet where it was right), and its error in numbers
    function forecast(f, id) {
      specs.push(f);
      const box = el("div", { className: "chart", id: `${id}-chart` });
      root.append(el("h3", { textContent: `${f.label}: the forecast made at t beside the load that came at t + horizon` }),
        el("p", { className: "forecast-error", id, textContent: f.text }), box);
      const drawnNow = drawnOnce();
      const u = new uPlot({
        width: width(), height: 220,
        cursor: cursor(),
        scales: { x: { time: true }, load: { range: (u, min, max) => [0, (max || 0) * 1.08 || 1] } },
        axes: [{}, { scale: "load", label: "total", size: 60 },
          { scale: "load", side: 1, label: "total", grid: { show: false } }],  // aligned with the row above
        series: [{ label: "time" },
          { label: f.series[0].label, scale: "load", stroke: "#9467bd", width: 1.5, spanGaps: false, points: { show: false } },
          { label: f.series[1].label, scale: "load", stroke: "#111", width: 1, spanGaps: false, points: { show: false } }],
        hooks: {
          draw: [drawnNow],
          setSelect: [zoomToSelection],
        },
      }, dataOf(f, full[0], full[1]), box);
      report.charts.push(u);
    }
  }

  function tune() {
    const s = data.summary;
    const k = r => [r.target, r.tolerance, r.scaleDownWindowSeconds, r.scaleDownPolicy, r.scaleUpPolicy,
      r.addForecast ? "added" : "-", r.forecastHorizon, r.forecastSeasons, r.forecastShape];
    const fig = p => [p.replicaHours, p.secondsUnderProvisioned, p.scaleEvents];
    const hb = s.hindsightBest, above = hb && hb.recommendedReplicaHoursAbove;
    root.append(el("p", { className: "verdict", textContent: s.verdict }),
      ...(hb ? [el("p", { className: "hindsight", textContent: `hindsight: the best of this search space on the ` +
        `held-out part (${hb.candidates} candidates, the same budget${hb.withinBudget ? "" : "; none within it"}): ` +
        `${hb.reportedOn.replicaHours.toFixed(1)} replica-hours, ${Math.round(hb.reportedOn.secondsUnderProvisioned)} s ` +
        `under-provisioned` + (above == null ? "" : `; ${s.recommended ? "the recommendation" : "the given spec (kept)"} ` +
        `is ${above >= 0 ? "+" : ""}${(above * 100).toFixed(1)}% in replica-hours from it`) })] : []),
      el("p", { textContent: `objective: ${s.objective}; ${s.candidates} candidates, chosen on ` +
        `${s.chosenOn.from} .. ${s.chosenOn.to}, reported on ${s.reportedOn.from} .. ${s.reportedOn.to} (held out)` }),
      el("p", { id: "reference", textContent: `${s.reference.text}; to read the same in backtest: ${s.reference.backtest}` }));
    const charts = el("div", { className: "side" });
    root.append(charts);
    const pt = p => p && p.replicaHours != null && p.secondsUnderProvisioned != null;
    function scatter(title, points, given, best, budget, id) {
      const box = el("div", { id });
      charts.append(box);
      const xs = points.filter(pt), all = xs.concat([given, best].filter(pt));
      const xmax = Math.max(1, budget / 60, ...all.map(p => p.secondsUnderProvisioned / 60));
      const ys = all.map(p => p.replicaHours), ymin = Math.min(...ys), ymax = Math.max(...ys);
      const pad = Math.max(0.5, (ymax - ymin) * 0.08);
      const facet = ps => [ps.filter(pt).map(p => p.secondsUnderProvisioned / 60), ps.filter(pt).map(p => p.replicaHours)];
      const drawn = drawnOnce();
      const u = new uPlot({
        mode: 2, title, width: Math.min(760, Math.max(420, width() / 2 - 20)), height: 380,
        legend: { live: false },
        cursor: { drag: { x: true, y: true } },
        scales: { x: { time: false, auto: false, range: [-xmax * 0.03, xmax * 1.08] },
          y: { auto: false, range: [Math.max(0, ymin - pad), ymax + pad] } },
        axes: [{ label: "minutes under-provisioned" }, { label: "replica-hours", size: 60 }],
        series: [{},
          { label: "candidates", stroke: "#777", fill: "rgba(120,120,120,0.35)", paths: uPlot.paths.points(), points: { size: 7, width: 1 } },
          { label: "given", stroke: "#000", fill: "#000", paths: uPlot.paths.points(), points: { size: 13, width: 1 } },
          { label: "recommended", stroke: "#d62728", fill: "#d62728", paths: uPlot.paths.points(), points: { size: 13, width: 1 } }],
        hooks: {
          draw: [drawn, u => {
            const ctx = u.ctx, x = u.valToPos(budget / 60, "x", true), { top, height } = u.bbox;
            ctx.save();
            ctx.strokeStyle = "#d62728";
            ctx.setLineDash([3, 3]);
            ctx.beginPath();
            ctx.moveTo(x, top);
            ctx.lineTo(x, top + height);
            ctx.stroke();
            ctx.restore();
          }],
        },
      }, [null, facet(points), facet([given]), facet([best])], box);
      report.charts.push(u);
    }
    scatter("chosen-on part: every candidate (dotted: the budget)", s.all.map(a => a.chosenOn),
      s.given.chosenOn, s.best.chosenOn, s.budgetSeconds.chosenOn, "chosen");
    scatter("held-out part: the table's candidates", s.top.map(a => a.reportedOn),
      s.given.reportedOn, s.best.reportedOn, s.budgetSeconds.reportedOn, "held-out");
    const heads = ["", "target", "tolerance", "down window", "down policy", "up policy", "forecast", "horizon",
      "seasons", "shape", "replica-h", "under-prov. s", "events", "held out: replica-h", "under-prov. s", "events"];
    const rows = [["given", ...k(s.given.knobs), ...fig(s.given.chosenOn), ...fig(s.given.reportedOn)]]
      .concat(s.top.map((t, i) => [String(i + 1), ...k(t.knobs), ...fig(t.chosenOn), ...fig(t.reportedOn)]));
    root.append(table(heads, rows, "summary"));
    root.append(el("div", { className: "side" },
      el("div", { className: "recommended" },
        el("h2", { textContent: s.recommended ? "recommended spec" : "the given spec (unchanged: nothing recommended)" }),
        el("pre", { id: "recommended-yaml", textContent: data.chosen })),
      el("div", {}, el("h2", { textContent: "given spec" }), el("pre", { id: "given-yaml", textContent: data.given }))));
  }

  if (data.kind === "backtest") backtest(); else tune();
})();
