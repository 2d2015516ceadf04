// The run page: live figures, the task table (filters, search, sort, pages; all in the URL).
"use strict";

const RUN = {
  id: MF.param("id"),
  filters: { state: "f-state", type: "f-type", error_kind: "f-error", q: "f-q" },
  sort: MF.param("sort") || "id",
  page: parseInt(MF.param("page") || "1", 10) || 1,
  lastDone: -1,
  columns: [["task", "id"], ["outcome", "outcome"], ["state", "state"], ["type", "type"], ["attempts", "attempts"],
    ["reward", "reward"], ["time", "duration_s"], ["error kind", null], ["error", null]],

  // The page's state as URL parameters (what a shared link reopens).
  query() {
    const q = new URLSearchParams({ id: RUN.id });
    for (const [k, el] of Object.entries(RUN.filters)) { const v = document.getElementById(el).value.trim(); if (v) q.set(k, v); }
    if (RUN.sort !== "id") q.set("sort", RUN.sort);
    if (RUN.page > 1) q.set("page", String(RUN.page));
    const vs = document.getElementById("vs").value.trim();
    if (vs) q.set("vs", vs);
    return q;
  },

  summary(s) {
    const box = document.getElementById("summary");
    box.replaceChildren(MF.progress(s.done, s.total, s.cancelled),
      ` ${MF.graded(s)}, ${MF.num(s.throughput)} tasks/s (cancelled ones not counted). Outcomes: `, MF.outcomes(s.by_outcome));
    const parts = Object.entries(s.progress).map(([t, p]) => `${t} ${p.done}/${p.total} ${p.basis}` + (p.note ? ` (${p.note})` : ""));
    if (parts.length) box.append(MF.el("p", { id: "type-progress", text: "Done by type: " + parts.join(" · ") + ". A planned total is known from the run's config; a submitted one counts the tasks queued so far." }));
    if (s.arm === "control") box.prepend(RUN.control(s));
    if (s.driver === "gone") box.prepend(MF.el("p", { class: "notice", id: "driver-gone", text: "Driver gone: the process that drove this run ended with tasks unfinished; they will not move until `megaflow run --resume`." }));
    const types = Object.entries(s.by_type).map(([t, f]) => [t, f.tasks, f.graded, MF.pct(f.resolved_share), MF.num(f.reward_mean), MF.num(f.reward_std)]);
    const tt = MF.table(["type", "tasks", "graded", "resolved share", "reward mean", "reward std"], types); tt.id = "types-table";
    document.getElementById("by-type").replaceChildren(tt);
    if (s.done !== RUN.lastDone) { RUN.lastDone = s.done; RUN.load(); }
  },

  // A control arm's figures read as the negative control they are, beside its job's.
  control(s) {
    const limit = s.control_limit === null || s.control_limit === undefined ? "" : `; the job expects it to resolve at most ${MF.pct(s.control_limit)}`;
    const cmp = MF.link("/run?" + new URLSearchParams({ id: s.job, vs: s.id }), "per instance beside it");
    return MF.el("p", { class: "notice", id: "control-arm" }, "Control arm of job ", MF.link(MF.runHref(s.job), s.job),
      `: the same tasks run by the control's model, a negative control${limit} (`, cmp, ").");
  },

  head(view) {
    const tr = MF.el("tr");
    for (const [label, key] of RUN.columns) {
      if (!key) { tr.append(MF.el("th", { text: label })); continue; }
      const mark = RUN.sort === key ? " ▲" : RUN.sort === "-" + key ? " ▼" : "";
      const th = MF.el("th", { class: "sortable", "data-sort": key, text: label + mark });
      th.onclick = () => { RUN.sort = RUN.sort === key ? "-" + key : key; RUN.page = 1; RUN.load(); };
      tr.append(th);
    }
    return tr;
  },

  pager(view) {
    const box = document.getElementById("pager");
    const go = (p) => () => { RUN.page = p; RUN.load(); };
    const prev = MF.el("button", { id: "page-prev" }, "← previous"), next = MF.el("button", { id: "page-next" }, "next →");
    prev.disabled = view.page <= 1; next.disabled = view.page >= view.pages;
    prev.onclick = go(view.page - 1); next.onclick = go(view.page + 1);
    box.replaceChildren(prev, MF.el("span", { id: "page-info", text: `page ${view.page} of ${view.pages} · ${view.matched} tasks match` }), next);
  },

  async load() {
    const q = RUN.query();
    history.replaceState(null, "", "/run?" + q);
    try {
      const view = await MF.get("/api/run?" + q);
      if (view.page > view.pages) { RUN.page = view.pages; return RUN.load(); }
      const table = MF.el("table", { id: "tasks-table" });
      table.append(RUN.head(view));
      for (const t of view.tasks) {
        const err = t.error || "";
        table.append(MF.el("tr", {}, ...[
          MF.el("a", { href: MF.taskHref(t.id), title: t.id }, t.short_id), t.outcome, t.state, t.type, t.attempts,
          MF.num(t.reward), MF.secs(t.duration_s), t.error_kind || "",
          MF.el("span", { class: "clip", title: err }, err.length > 120 ? err.slice(0, 120) + "…" : err),
        ].map((c) => MF.el("td", {}, c ?? "-"))));
      }
      document.getElementById("tasks").replaceChildren(table);
      RUN.pager(view);
      const train = document.getElementById("training-link");
      train.replaceChildren(...(view.training ? [MF.link("/training?id=" + encodeURIComponent(RUN.id), "training curves of this run")] : []));
      MF.histogram(document.getElementById("reward-chart"), "reward", view.reward_histogram, "reward");
      MF.histogram(document.getElementById("time-chart"), "time per task", view.time_histogram, "seconds");
    } catch (err) { MF.fail(err); }
  },

  // An unknown run: say so plainly, in place of a page of dashes and "stream closed".
  missing(msg) {
    document.getElementById("title").textContent = "No such run";
    document.querySelector("main").replaceChildren(MF.el("h1", { id: "no-run", text: `No such run: ${RUN.id}` }),
      MF.el("p", { text: msg + " " }, MF.link("/", "All runs")));
    document.getElementById("live").textContent = "";
  },

  async start() {
    document.getElementById("title").textContent = RUN.id;
    const states = ["queued", "scheduled", "starting", "running", "grading", "succeeded", "failed", "timed_out", "cancelled", "preempted", "retrying"];
    const kinds = ["infra", "agent", "timeout", "cancelled", "infra_lost", "tampered"];
    for (const s of states) document.getElementById("f-state").append(MF.el("option", {}, s));
    for (const k of kinds) document.getElementById("f-error").append(MF.el("option", {}, k));
    for (const [k, el] of Object.entries(RUN.filters)) document.getElementById(el).value = MF.param(k) || "";
    // Handlers first: a filter changed while the page still loads is not lost.
    for (const el of ["f-state", "f-type", "f-error"]) document.getElementById(el).onchange = () => { RUN.page = 1; RUN.load(); };
    let typing;
    document.getElementById("f-q").oninput = () => { clearTimeout(typing); typing = setTimeout(() => { RUN.page = 1; RUN.load(); }, 250); };
    try { await MF.get("/api/run?" + new URLSearchParams({ id: RUN.id, per_page: "1" })); }
    catch (err) { RUN.missing(String(err.message || err)); return; }
    CMP.start(RUN.id);
    const source = MF.live("/api/stream?run=" + encodeURIComponent(RUN.id), RUN.summary);
    source.addEventListener("error", (ev) => { if (ev.data) { source.close(); RUN.missing(JSON.parse(ev.data)); } });
  },
};
RUN.start();
