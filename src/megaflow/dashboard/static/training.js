// The training page: every metric the loop records per step, charted; a second run overlaid (?vs=).
"use strict";

const COLORS = ["#c62828", "#1565c0", "#2f7d32", "#6a1b9a", "#ef6c00", "#00838f"];
const SET_COLORS = ["#ef6c00", "#00838f", "#ad1457", "#5d4037", "#558b2f", "#283593"];

const TR = {
  id: MF.param("id"),
  vs: MF.param("vs"),
  smooth: parseFloat(MF.param("smooth") || "0") || 0,
  // [chart id, title, series: [label, value of a step (or null)]]; a chart none of whose values
  // exist in any run shown is hidden (a metric the loop did not compute, KL with kl_coef 0).
  charts: [
    ["loss", "loss", [["loss", (s) => s.loss]]],
    ["grad", "grad norm (before clipping)", [["grad norm", (s) => s.grad_norm]]],
    ["clip", "clip fraction", [["clip fraction", (s) => s.clip_fraction]]],
    ["kl", "KL to the reference", [["KL", (s) => s.kl]]],
    ["signal", "groups with signal", [["with signal", (s) => s.groups_with_signal], ["groups", (s) => s.groups]]],
    ["mismatch", "sampler/trainer mismatch (k3 KL)", [["mismatch", (s) => s.mismatch]]],
    ["entropy", "entropy", [["entropy", (s) => s.entropy]]],
    ["length", "response length (tokens)", [["mean length", (s) => s.response_length]]],
    ["trunc", "truncated share", [["truncated", (s) => s.truncation_rate]]],
    // two charts: the trainer alone is often 1000 times faster than the whole step
    ["tps", "trained tokens per second of the step", [["tokens/s", (s) => TR.rate(s.tokens, s.seconds)]]],
    ["tps-train", "trained tokens per second of the trainer", [["tokens/s (trainer)", (s) => TR.rate(s.tokens, s.train_s)]]],
    ["time", "time per step (s)", [["step", (s) => s.seconds || null], ["waiting for rollouts", (s) => s.rollout_s], ["trainer", (s) => s.train_s], ["weight sync", (s) => s.sync_s]]],
    ["stale", "weights version and staleness", [["weights version", (s) => s.weights_version], ["max staleness", (s) => s.staleness_max]]],
    ["samples", "samples per step", [["samples", (s) => s.samples || null], ["dropped", (s) => s.dropped], ["reweighted", (s) => s.reweighted]]],
  ],

  // The steps' table: [head, value of a step]; a column no step has a value for is left out,
  // as is a chart (and KL with kl_coef 0).
  columns: [
    ["step", null], ["train reward", (s) => MF.num(s.reward_mean)], ["std", (s) => TR.n(s.reward_std)],
    ["loss", (s) => TR.n(s.loss, 4)], ["grad norm", (s) => TR.n(s.grad_norm, 3)], ["clip", (s) => TR.n(s.clip_fraction, 3)],
    ["signal", (s) => (s.groups_with_signal ?? null) === null ? null : `${s.groups_with_signal}/${s.groups ?? "?"}`],
    ["KL", (s) => TR.n(s.kl, 4)], ["version", (s) => s.weights_version], ["staleness", (s) => s.staleness_max],
    ["samples", (s) => s.samples], ["tokens/s", (s) => TR.n(TR.rate(s.tokens, s.seconds), 0)], ["step s", (s) => TR.n(s.seconds || null, 1)],
    ["rollouts s", (s) => TR.n(s.rollout_s, 1)], ["trainer s", (s) => TR.n(s.train_s, 1)], ["sync s", (s) => TR.n(s.sync_s, 2)],
  ],

  // A table whose figures stay whole on a narrow page (it scrolls instead); with pathsLast,
  // its last column (paths: "read from") may wrap.
  unwrapped(t, pathsLast = false) {
    t.style.whiteSpace = "nowrap";
    if (pathsLast) for (const row of t.rows) row.cells[row.cells.length - 1].style.whiteSpace = "normal";
  },

  // The held-out rounds' table, as the steps'; a round's step opens its eval rollouts.
  rounds: [
    ["step", null], ["version", (e) => e.weights_version],
    ["pass@1 [95% interval]", (e) => (e.reward_mean ?? null) === null ? null : `${MF.num(e.reward_mean, 3)} [${MF.num(e.ci_low, 3)}, ${MF.num(e.ci_high, 3)}]`],
    ["pass@k", (e) => ((e.pass_at_k ?? null) === null ? null : `${MF.num(e.pass_at_k, 3)} (k ${e.k})`)], ["greedy", (e) => TR.n(e.greedy, 3)],
    ["samples", (e) => e.samples], ["lost", (e) => e.masked || null], ["malformed", (e) => TR.n(e.malformed, 3)],
  ],

  n(x, digits = 2) { return x === null || x === undefined ? null : MF.num(x, digits); },
  rate(tokens, seconds) { return tokens && seconds ? tokens / seconds : null; },

  // A figure the run's config says was not computed (KL without a reference model), even if
  // an older loop wrote it as 0.
  off(id, v) { return id === "kl" && !!v.config && !!v.config.train && (v.config.train.kl_coef ?? 0) === 0; },

  // As many charts a row as fit at 520 px or more (one to three), each as wide as its share.
  width() {
    const box = document.getElementById("charts").clientWidth || 900, gap = 24;
    const cols = Math.max(1, Math.min(3, Math.floor((box + gap) / (520 + gap))));
    return Math.floor((box - gap * (cols - 1)) / cols) - 2;
  },

  // Exponential moving average (the smoothing slider), nulls kept as gaps.
  ema(values) {
    if (!TR.smooth) return values;
    let last = null;
    return values.map((v) => (v === null || v === undefined ? null : (last = last === null ? v : TR.smooth * last + (1 - TR.smooth) * v)));
  },

  // One x axis for the runs shown: the union of their steps (and held-out rounds).
  xs(views) {
    const set = new Set();
    for (const v of views) for (const s of v.steps) set.add(s.step);
    return [...set].sort((a, b) => a - b);
  },

  at(xs, rows, get) {
    const by = new Map(rows.map((r) => [r.step, get(r)]));
    return xs.map((x) => { const v = by.get(x); return v === undefined || v === null || Number.isNaN(v) ? null : v; });
  },

  rewardChart(views, width) {
    const xs = [...new Set(views.flatMap((v) => [...v.steps.map((s) => s.step), ...v.evals.map((e) => e.step)]))].sort((a, b) => a - b);
    const series = [];
    views.forEach((v, i) => {
      const p = views.length > 1 ? v.run + ": " : "", dash = i ? [8, 4] : null;
      // a spread or an interval is a shaded band of its line's colour, not two more lines
      const line = (label, values, c, band) => series.push({ label: p + label, values, color: COLORS[c], dash, band });
      const has = (items, key) => items.some((x) => x[key] !== undefined && x[key] !== null);
      const spread = (sign) => TR.at(xs, v.steps, (s) => ((s.reward_std ?? null) === null ? null : s.reward_mean + sign * s.reward_std));
      const std = has(v.steps, "reward_std") ? { lo: spread(-1), hi: spread(1) } : null;
      line(std ? "train reward (± std)" : "train reward", TR.ema(TR.at(xs, v.steps, (s) => s.reward_mean)), 0, std);
      if (v.evals.length) {
        const ci = has(v.evals, "ci_low") ? { lo: TR.at(xs, v.evals, (e) => e.ci_low), hi: TR.at(xs, v.evals, (e) => e.ci_high) } : null;
        line(ci ? "held-out pass@1 (95% interval)" : "held-out pass@1", TR.at(xs, v.evals, (e) => e.reward_mean), 1, ci);
      }
      if (v.evals.some((e) => e.greedy !== null && e.greedy !== undefined)) line("held-out greedy", TR.at(xs, v.evals, (e) => e.greedy), 2);
      const withK = v.evals.find((e) => e.pass_at_k !== null && e.pass_at_k !== undefined);
      if (withK) line(`held-out pass@${withK.k}`, TR.at(xs, v.evals, (e) => e.pass_at_k ?? null), 3);
      // held-out task sets (train.held_out as sets): each set's sampled pass@1 per round
      TR.setNames(v.evals).forEach((name, k) => series.push({ label: `${p}held-out ${name} pass@1`,
        values: TR.at(xs, v.evals, (e) => (e.sets && e.sets[name] ? e.sets[name].reward_mean : null)),
        color: SET_COLORS[k % SET_COLORS.length], dash: i ? [8, 4] : [4, 2] }));
    });
    const target = document.getElementById("reward-chart");
    target.plot = MF.lines(target, "reward (train per step ± std; held-out with its 95% interval)", xs, series, "step", { width, range: [0, 1] });
  },

  render(views) {
    const main = views[0];
    const box = document.getElementById("charts"), width = TR.width();
    TR.rewardChart(views, width);
    const xs = TR.xs(views), shown = [];
    for (const [id, title, specs] of TR.charts) {
      let target = document.getElementById(id + "-chart");
      const series = [];
      views.forEach((v, i) => specs.forEach(([label, get], j) => {
        const values = TR.at(xs, v.steps, get);
        if (values.some((x) => x !== null)) series.push({ label: (views.length > 1 ? v.run + ": " : "") + label, values: id === "stale" ? values : TR.ema(values), color: COLORS[j], dash: i ? [8, 4] : null });
      }));
      if (!target) { target = MF.el("div", { id: id + "-chart", class: "chart" }); box.append(target); }
      target.hidden = !series.length || TR.off(id, main);
      if (!target.hidden) { target.plot = MF.lines(target, title, xs, series, "step", { width }); shown.push(id); }
    }
    box.dataset.shown = shown.join(" ");
  },

  setNames(evals) {
    const names = [];
    for (const e of evals) for (const n of Object.keys(e.sets || {})) if (!names.includes(n)) names.push(n);
    return names;
  },

  // Each held-out set's latest round (the API's heldout_sets): pass@1 with its 95% interval.
  heldoutSets(v) {
    const sets = v.heldout_sets || [], box = document.getElementById("heldout-sets");
    box.hidden = !sets.length;
    const rows = sets.map((s) => [s.set, s.step, `${MF.num(s.reward_mean, 3)} [${MF.num(s.ci_low, 3)}, ${MF.num(s.ci_high, 3)}]`,
      s.samples ?? "-", s.masked ?? "-", MF.num(s.pass_at_k, 3), MF.num(s.greedy, 3), MF.num(s.malformed, 3)]);
    const t = MF.table(["set", "step", "pass@1 [95% interval]", "samples", "lost", "pass@k", "greedy", "malformed"], rows);
    t.id = "heldout-sets-table";
    document.getElementById("heldout-sets-body").replaceChildren(t);
  },

  // A table of steps or rounds: the columns some item has a value for, the first one linking
  // to the item's rollouts on the run page (its round's tasks: .s00003. or .e00003, greedy too).
  table(id, columns, items, v, type, round) {
    const link = (x) => (v.has_run ? MF.link(`/run?id=${encodeURIComponent(v.run)}&type=${type}&q=${encodeURIComponent(round(String(x.step).padStart(5, "0")))}`, String(x.step)) : x.step);
    const cols = columns.filter(([head, get]) => !get || (!TR.off(head === "KL" ? "kl" : head, v) && items.some((x) => (get(x) ?? null) !== null)));
    const t = MF.table(cols.map(([head]) => head), items.map((x) => cols.map(([, get]) => (get ? get(x) : link(x)))));
    t.id = id;
    TR.unwrapped(t);
    return MF.el("div", { style: "overflow-x: auto" }, t);
  },

  steps(v) {
    document.getElementById("steps").replaceChildren(TR.table("steps-table", TR.columns, v.steps, v, "train", (n) => `.s${n}.`));
    document.getElementById("rounds").hidden = !v.evals.length;
    document.getElementById("rounds-body").replaceChildren(TR.table("rounds-table", TR.rounds, v.evals, v, "eval", (n) => `.e${n}`));
  },

  detail(views) {
    const v = views[0];
    document.getElementById("title").textContent = "Training run " + v.run + (TR.vs ? " vs " + TR.vs : "");
    document.getElementById("detail").hidden = false;
    document.getElementById("source").textContent = "read from " + views.map((x) => `${x.run}: ${x.source || "-"}`).join("; ");
    const links = document.getElementById("links");
    links.replaceChildren(...(v.has_run ? [MF.el("a", { id: "run-link", href: MF.runHref(v.run) }, "rollouts of this run")] : [MF.el("span", { text: "no run of this id in the metadata store" })]));
    document.getElementById("problems").replaceChildren(...views.flatMap((x) => x.problems.map((p) => MF.el("p", { class: "error", text: p }))));
    TR.render(views.map((x) => ({ ...x, steps: (x.curve && x.curve.steps) || [], evals: (x.curve && x.curve.evals) || [] })));
    TR.heldoutSets(v);
    TR.steps({ ...v, steps: (v.curve && v.curve.steps) || [], evals: (v.curve && v.curve.evals) || [] });
    const cfg = document.getElementById("config");
    if (v.config && !cfg.dataset.done) { cfg.dataset.done = "1"; cfg.append(MF.el("details", {}, MF.el("summary", { text: "the run's config" }), MF.el("pre", { class: "config", id: "config-json", text: JSON.stringify(v.config, null, 2) }))); }
  },

  list(runs) {
    const rows = runs.map((r) => [MF.link("/training?id=" + encodeURIComponent(r.run), r.run), TR.arm(r), r.steps,
      MF.num(r.heldout_reward), MF.num(r.loss, 4), MF.num(r.kl, 4), r.weights_version ?? "-", r.staleness_max ?? "-", r.source || r.problems.join("; ")]);
    const t = MF.table(["run", "arm", "steps", "held-out reward", "loss", "KL", "weights version", "max staleness", "read from"], rows); t.id = "training-table";
    TR.unwrapped(t, true);
    document.getElementById("runs").replaceChildren(rows.length ? MF.el("div", { style: "overflow-x: auto" }, t) : MF.el("p", { text: "No training run found (megaflow train writes its curve under --train-dir and in its checkpoints)." }));
    TR.picker(runs);
  },

  // A control arm of the loop (train.control shuffled, or --no-updates) or a trained run.
  arm(r) { return r.updates === false ? "control: no updates" : r.control && r.control !== "none" ? `control: ${r.control} rewards` : "trained"; },

  // Two runs to overlay (?id=A&vs=B). On a run's page it is the run itself, against the run
  // shown with it or else a control arm (the trained run beside its control, in one click).
  picker(runs) {
    document.getElementById("overlay").hidden = runs.length < 2;
    const a = document.getElementById("ov-a"), b = document.getElementById("ov-b");
    if (a.options.length) return;
    for (const sel of [a, b]) runs.forEach((r) => sel.append(MF.el("option", { value: r.run }, `${r.run} (${TR.arm(r)})`)));
    if (TR.id) a.value = TR.id; // else the first run, beside a control or the next run
    const other = TR.vs || (runs.find((r) => r.run !== a.value && TR.arm(r) !== "trained") || runs.find((r) => r.run !== a.value) || {}).run;
    if (other) b.value = other;
  },

  start() {
    const slider = document.getElementById("smooth");
    slider.value = String(TR.smooth);
    slider.oninput = () => {
      TR.smooth = parseFloat(slider.value);
      const q = new URLSearchParams(location.search); if (TR.smooth) q.set("smooth", slider.value); else q.delete("smooth");
      history.replaceState(null, "", "/training?" + q); if (TR.last) TR.detail(TR.last);
    };
    document.getElementById("ov-go").onclick = () => { location.href = "/training?" + new URLSearchParams({ id: document.getElementById("ov-a").value, vs: document.getElementById("ov-b").value }); };
    if (!TR.id) { MF.poll("/api/training", TR.list, 3); return; }
    let resized = null; // charts follow the page's width, not only the next poll
    window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(() => TR.last && TR.detail(TR.last), 150); });
    MF.get("/api/training").then(TR.picker, MF.fail);
    const ids = [TR.id, ...(TR.vs ? [TR.vs] : [])];
    // Polled: the loop rewrites curve.json after every step, so each step shows within seconds.
    MF.poll("/api/training?id=" + encodeURIComponent(TR.id), async (v) => {
      const views = [v, ...(await Promise.all(ids.slice(1).map((i) => MF.get("/api/training?id=" + encodeURIComponent(i)))))];
      TR.last = views; TR.detail(views);
    }, 2);
  },
};
TR.start();
