// MegaFlow dashboard: helpers shared by the pages (fetching, formatting, charts, the live stream).
"use strict";

const MF = {
  param(name) { return new URLSearchParams(location.search).get(name); },

  async get(path) {
    const resp = await fetch(path, { credentials: "same-origin" });
    if (resp.status === 401) {  // signed out (the token changed): back here after signing in
      location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
      throw new Error("signed out");
    }
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || resp.statusText);
    return body;
  },

  el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  },

  num(x, digits = 2) { return x === null || x === undefined ? "-" : Number(x).toFixed(digits); },
  pct(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%"; },
  secs(x) { return x === null || x === undefined ? "-" : Number(x).toFixed(1) + " s"; },

  link(href, text) { return MF.el("a", { href }, text); },
  taskHref(id) { return "/task?id=" + encodeURIComponent(id); },
  runHref(id) { return "/run?id=" + encodeURIComponent(id); },

  // Done tasks in green, cancelled ones apart in grey: ended, but no work, so never counted
  // as done (core/outcomes.py's "done"); `ended` counts both, as the API's `done` does.
  progress(ended, total, cancelled = 0) {
    const done = ended - cancelled, gone = cancelled ? `, ${cancelled} cancelled` : "";
    const bar = MF.el("div", { class: "bar", title: `${done}/${total} done${gone}` });
    const pct = (n) => (total ? (100 * n) / total : 0);
    bar.append(MF.el("div", { style: `width:${pct(done)}%` }), MF.el("div", { class: "cancelled", style: `width:${pct(cancelled)}%` }));
    return MF.el("span", { class: "progress" }, bar, ` ${done}/${total} done${gone}`);
  },

  // Where a run's tasks stand, by outcome word (resolved, agent error, running...), errors
  // in red; never the state "succeeded" beside an error count.
  outcomes(byOutcome) {
    const out = MF.el("span", { class: "outcomes" });
    for (const [k, n] of Object.entries(byOutcome || {})) {
      if (out.childNodes.length) out.append(", ");
      out.append(MF.el("span", { class: MF.ERRORS.includes(k) ? "bad" : "" }, `${k} ${n}`));
    }
    return out;
  },
  ERRORS: ["agent error", "infra error", "infra lost", "timed out", "cancelled", "tampered"],

  // A control arm says so, with the most its job lets it resolve (its expect section).
  arm(s) {
    if (s.arm !== "control") return null;
    const limit = s.control_limit === null || s.control_limit === undefined ? "" : `, expected to resolve at most ${MF.pct(s.control_limit)}`;
    return MF.el("span", { class: "arm", title: `the negative control of job ${s.job}${limit}` }, "control arm");
  },

  // Graded figures of a run or of one task type: resolved share (over every task, as the
  // command line's), resolved of graded, reward mean ± std.
  graded(f) {
    if (!f.graded) return `resolved share - (nothing graded of ${f.tasks})`;
    return `resolved share ${MF.pct(f.resolved_share)} (${f.resolved}/${f.tasks}; ${f.graded} graded), reward ${MF.num(f.reward_mean)} ± ${MF.num(f.reward_std)}`;
  },

  errors(kinds) {
    const parts = Object.entries(kinds || {}).map(([k, n]) => `${k} ${n}`);
    return parts.length ? parts.join(", ") : "none";
  },

  table(head, rows) {
    const t = MF.el("table");
    t.append(MF.el("tr", {}, ...head.map((h) => MF.el("th", { text: h }))));
    for (const r of rows) t.append(MF.el("tr", {}, ...r.map((c) => c instanceof Node && c.tagName === "TD" ? c : MF.el("td", {}, c ?? "-"))));
    return t;
  },

  histogram(target, title, hist, unit) {
    target.replaceChildren();
    if (!hist.edges.length) { target.append(MF.el("p", { text: `${title}: no values` })); return; }
    const step = hist.edges.length > 1 ? hist.edges[1] - hist.edges[0] : 1;
    const xs = hist.edges.map((e) => e + step / 2);
    const opts = {
      title, width: 420, height: 220, legend: { show: false },
      scales: { x: { time: false }, y: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
      axes: [{ label: unit }, { label: "tasks" }],
      series: [{}, { label: "tasks", fill: "rgba(47,125,50,0.35)", stroke: "#2f7d32",
        paths: uPlot.paths.bars({ size: [0.9] }) }],
    };
    new uPlot(opts, [xs, hist.counts], target);
  },

  // Calls onData with each summary the server sends; says in the header whether it is live.
  live(path, onData) {
    const status = document.getElementById("live");
    const source = new EventSource(path);
    source.onmessage = (ev) => { status.textContent = "live " + new Date().toLocaleTimeString(); onData(JSON.parse(ev.data)); };
    source.onerror = () => { status.textContent = "stream closed"; };
    return source;
  },

  fail(err) {
    const main = document.querySelector("main");
    main.append(MF.el("p", { class: "error", text: String(err.message || err) }));
  },
};

// Fetches path now and every `seconds`, passing the JSON to onData; says in the header when.
MF.poll = function (path, onData, seconds = 2) {
  const status = document.getElementById("live");
  const tick = async () => {
    try { onData(await MF.get(path)); status.textContent = "updated " + new Date().toLocaleTimeString(); }
    catch (err) { status.textContent = "update failed: " + (err.message || err); }
  };
  tick();
  return setInterval(tick, seconds * 1000);
};

// The metrics sources a live page read, and why it shows no figures if it shows none.
MF.sources = function (target, view) {
  const rows = view.sources.map((s) => [s.name, s.ok ? "ok" : "failed", s.error || ""]);
  const parts = [];
  if (view.reason) parts.push(MF.el("p", { class: "notice", id: "reason", text: "Metrics not wired: " + view.reason }));
  if (rows.length) parts.push(MF.table(["metrics source", "read", "error"], rows));
  target.replaceChildren(...parts);
};

MF.bytes = function (x) {
  if (x === null || x === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB"]; let i = 0;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
  return x.toFixed(i ? 1 : 0) + " " + units[i];
};

// A line chart of several series over the same x values (null: no point). opts.width sizes it
// to the page; opts.range fixes the y axis (rewards 0-1); a flat series gets a small span
// around its value, not uPlot's 0-100, and not below 0 if it is not (a grad norm of 0 on a
// -1..1 axis). A series with a band ({lo, hi}: a spread, an interval) has it shaded in its
// colour under one legend entry: the band's edges are series after all the drawn ones (so
// data[1..] stay the series given), kept out of the legend, and shown or hidden with theirs.
// Returns the uPlot (its data, scales and bands, for a page's tests).
MF.lines = function (target, title, xs, series, xlabel, opts = {}) {
  target.replaceChildren();
  if (!xs.length) { target.append(MF.el("p", { text: `${title}: no points yet` })); return; }
  const colors = ["#c62828", "#1565c0", "#2f7d32", "#6a1b9a", "#ef6c00", "#00838f"];
  const yrange = (u, lo, hi) => {
    if (lo === null || hi === null) return [0, 1];
    if (opts.range) return [Math.min(opts.range[0], lo), Math.max(opts.range[1], hi)];
    if (lo === hi) { const pad = Math.abs(lo) * 0.1 || 1; return [lo >= 0 ? Math.max(0, lo - pad) : lo - pad, hi + pad]; }
    const pad = (hi - lo) * 0.08;
    return [lo >= 0 && lo - pad < 0 ? 0 : lo - pad, hi + pad];
  };
  // Tick labels with as many decimals as the ticks' spacing needs (6.3215, 6.3220, ...).
  const tick = (u, vals) => {
    const gap = vals.length > 1 ? Math.abs(vals[1] - vals[0]) : 0;
    const digits = gap > 0 && gap < 1 ? Math.min(8, Math.ceil(-Math.log10(gap) + 0.3)) : 0;
    return vals.map((v) => (v === null ? "" : v !== 0 && Math.abs(v) < 1e-3 && gap < 1e-3 ? v.toExponential(1) : v.toFixed(digits)));
  };
  const color = (s, i) => s.color || colors[i % colors.length];
  const edges = [], bands = [], of = {};  // of: a band edge's index -> its series' index
  series.forEach((s, i) => {
    if (!s.band) return;
    const hi = series.length + 1 + edges.length;
    edges.push({ label: s.label + " (band top)", values: s.band.hi }, { label: s.label + " (band bottom)", values: s.band.lo });
    bands.push({ series: [hi, hi + 1], fill: color(s, i) + "26" });
    of[hi] = of[hi + 1] = i + 1;
  });
  const opt = {
    title, width: opts.width || 460, height: 220, legend: { live: false },
    scales: { x: { time: false }, y: { range: yrange } },
    axes: [{ label: xlabel, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, { size: 64, values: tick }],  // steps are whole
    series: [{ label: xlabel }, ...series.map((s, i) => ({
      label: s.label, stroke: color(s, i), width: s.thin ? 1 : 2,
      dash: s.dash || undefined, points: { show: !s.thin }, spanGaps: true,
    })), ...edges.map((e) => ({ label: e.label, stroke: "transparent", width: 0, points: { show: false }, spanGaps: true }))],
    bands,
    hooks: { setSeries: [(u, i, o) => {  // a band follows its series' legend toggle
      if (i === null || of[i] || !o || o.show === undefined) return;
      for (const [edge, owner] of Object.entries(of)) if (owner === i) u.setSeries(Number(edge), { show: o.show });
    }] },
  };
  const plot = new uPlot(opt, [xs, ...series.map((s) => s.values), ...edges.map((e) => e.values)], target);
  const rows = plot.root.querySelectorAll(".u-legend .u-series");
  const shift = plot.series.length - rows.length;  // the x series has no entry without live values
  for (const edge of Object.keys(of)) if (rows[edge - shift]) rows[edge - shift].style.display = "none";  // one entry a series
  return plot;
};
