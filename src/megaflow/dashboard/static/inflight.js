// The tasks in flight across every run, from the metadata store (no metrics needed): the
// sandboxes and scheduler pages both show them. A task whose run's driver is gone is stuck in
// its state with no sandbox behind it: marked, and left out of the live counts.
"use strict";

MF.inflight = function (target, view, opts = {}) {
  const live = Object.entries(view.live).filter(([, n]) => n).map(([s, n]) => `${s} ${n}`).join(", ");
  const parts = [MF.el("p", { id: "flight-count", text: view.live_total
    ? `${view.live_total} tasks in flight under a live driver: ${live}.`
    : "No task in flight under a live driver." })];
  if (view.stuck) {
    parts.push(MF.el("p", { class: "notice", id: "flight-stuck", text: `${view.stuck} more are stuck in flight: their run's driver is gone, ` +
      "so no sandbox runs them; `megaflow run --resume` moves them again." }));
  }
  if (!opts.countsOnly && view.tasks.length) {
    const rows = view.tasks.map((t) => [MF.link(MF.runHref(t.run), t.run), MF.link(MF.taskHref(t.task), t.short_id),
      t.driver_gone ? MF.el("span", { class: "bad" }, `${t.state} (driver gone)`) : t.state, MF.secs(t.since_s), t.attempt]);
    const t = MF.table(["run", "task", "state", "in this state for", "attempt"], rows);
    t.id = "flight-table";
    parts.push(t);
    if (view.total > view.tasks.length) parts.push(MF.el("p", { text: `The ${view.tasks.length} longest in their state of ${view.total}.` }));
  }
  target.replaceChildren(...parts);
};
