// The run page's comparison with another run or arm (?vs=OTHER): one row per instance.
"use strict";

const CMP = {
  side(s) { return s ? [`${s.resolved}/${s.samples}`, MF.num(s.reward_mean)] : ["-", "-"]; },

  async load(a, b) {
    const box = document.getElementById("compare");
    if (!b) { box.replaceChildren(); return; }
    try {
      const v = await MF.get("/api/compare?" + new URLSearchParams({ a, b }));
      const rows = v.rows.map((r) => {
        const d = r.delta === null ? "-" : (r.delta > 0 ? "+" : "") + MF.num(r.delta);
        const cls = r.delta === null || r.delta === 0 ? "" : r.delta > 0 ? "ok" : "bad";
        return [r.instance, r.type, ...CMP.side(r.a), ...CMP.side(r.b), MF.el("td", { class: cls, text: d })];
      });
      // short headers (A, B) so long run ids do not wrap every row; the ids are named above
      const t = MF.table(["instance", "type", "A resolved", "A reward", "B resolved", "B reward", "B − A reward"], rows);
      t.id = "compare-table";
      const legend = MF.el("p", { id: "compare-legend" }, "A: ", MF.link(MF.runHref(a), a), " · B: ", MF.link(MF.runHref(b), b),
        ". Resolved: resolved samples / samples of the instance; reward: the mean over its graded samples.");
      box.replaceChildren(MF.el("h2", { text: "Per instance, this run (A) beside another (B)" }), legend, t);
    } catch (err) { box.replaceChildren(MF.el("p", { class: "error", text: String(err.message || err) })); }
  },

  // The "compare with" box (its value in the URL) and a link to the run's control arm.
  async start(runId) {
    const input = document.getElementById("vs");
    input.value = MF.param("vs") || "";
    const go = () => {
      const q = new URLSearchParams(location.search);
      if (input.value.trim()) q.set("vs", input.value.trim()); else q.delete("vs");
      history.replaceState(null, "", "/run?" + q);
      CMP.load(runId, input.value.trim());
    };
    input.onchange = go;
    const runs = await MF.get("/api/runs");
    const control = runs.find((r) => r.id === runId + "-control");
    if (control) {
      const a = MF.el("a", { href: "#", id: "vs-control" }, "compare with its control arm");
      a.onclick = (ev) => { ev.preventDefault(); input.value = control.id; go(); };
      document.getElementById("vs-links").replaceChildren(a);
    }
    CMP.load(runId, input.value.trim());
  },
};
