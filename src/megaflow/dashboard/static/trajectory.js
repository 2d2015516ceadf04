// The trajectory page: outcome banner, previous/next, the GRPO group, decoded tokens, and
// the prompt and turns (trajectory_turns.js).
"use strict";

const TJ = {
  // Tokens as text, coloured by logprob; id, logprob, mask and text on hover.
  tokens(sample, v) {
    const box = document.getElementById("sample");
    box.append(MF.el("h2", { text: "Train sample tokens" }));
    if (!v.trained) box.append(MF.el("p", { id: "masked", class: "notice", text: "Masked: this sample has no graded reward, so it trained nothing; its tokens are shown as the model generated them." }));
    if (sample.problem) { box.append(MF.el("p", { class: "error", text: "no token sequence: " + sample.problem })); return; }
    const inLoss = sample.loss_mask.reduce((a, b) => a + b, 0);
    box.append(MF.el("p", { text: `${sample.prompt_ids.length} prompt tokens, ${sample.completion_ids.length} after them (${inLoss} generated, in the loss); weights v${sample.weights_version}. ` +
      "Generated tokens are coloured by probability (green near 1, red low); grey ones are fed back (mask 0). " +
      (sample.decoded_by ? `Decoded with ${sample.decoded_by}.` : `Ids only: ${sample.not_decoded}.`) }));
    // a token that decodes to nothing holds part of a character its next token completes
    const show = (text, id) => (text === null || text === undefined ? `[${id}]` : text);
    const part = (text) => (text === "" ? " (part of the next token's character)" : "");
    const prompt = MF.el("details", { id: "prompt-box", open: "" }, MF.el("summary", { text: `prompt (${sample.prompt_ids.length} tokens)` }));
    const pdiv = MF.el("div", { class: "tokens", id: "prompt-tokens" });
    sample.prompt_ids.forEach((id, j) => {
      const text = sample.prompt_text?.[j];
      pdiv.append(MF.el("span", { class: "prompt" + (text === "" ? " joined" : ""), title: `id ${id} (prompt)${part(text)}` }, show(text, id)));
    });
    prompt.append(pdiv);
    const div = MF.el("div", { class: "tokens", id: "tokens" });
    sample.completion_ids.forEach((id, j) => {
      const lp = sample.logprobs[j], m = sample.loss_mask[j], text = sample.completion_text?.[j];
      const span = MF.el("span", { title: `id ${id} · logprob ${lp.toFixed(3)} · mask ${m}${part(text)}`, "data-mask": m, "data-id": id }, show(text, id));
      if (m) span.style.background = `hsl(${Math.round(120 * Math.exp(lp))}, 70%, 80%)`; else span.className = "fed";
      if (text === "") span.classList.add("joined");
      div.append(span);
    });
    box.append(prompt, MF.el("div", { class: "kind", text: "completion" }), div);
  },

  group(g) {
    const box = document.getElementById("group");
    if (!g) return;
    const e = g.estimator;
    const why = e.problem ? ` No advantage shown: ${e.problem}.` : "";
    const over = e.step_groups > 1 ? ` Computed over the step's ${e.step_groups} groups.` : "";
    const notes = e.notes.length ? ` Shown ${e.notes.join("; ")}.` : "";
    box.append(MF.el("h2", { text: `Group ${g.id}` }),
      MF.el("p", { id: "estimator" }, MF.el("strong", { text: `Advantage estimator: ${e.name}` }), ` (${e.formula}).${over}${notes}${why}`));
    const rows = g.members.map((m) => {
      const name = m.task.slice(m.task.lastIndexOf("/") + 1);
      const cell = m.has_trajectory && !m.this ? MF.link("/trajectory?id=" + encodeURIComponent(m.task), name) : name + (m.this ? " (this one)" : "");
      return [cell, m.outcome, MF.num(m.reward), MF.num(m.advantage, 3)];
    });
    const t = MF.table(["sample", "outcome", "reward", "advantage"], rows); t.id = "group-table";
    g.members.forEach((m, i) => { if (m.this) t.rows[i + 1].className = "this"; });
    box.append(t);
  },

  // Previous/next trajectory of the run, and of the group (the task's other samples).
  nav(v) {
    const nav = document.getElementById("nav");
    const near = (id, which, text) => (id ? MF.el("a", { id: which, href: "/trajectory?id=" + encodeURIComponent(id) }, text) : MF.el("span", { id: which, class: "off" }, text));
    nav.append(MF.link(MF.taskHref(v.task), "task"), " · ", MF.link(MF.runHref(v.run), "run"), " · run: ",
      near(v.previous, "prev", "← previous"), " · ", near(v.next, "next", "next →"));
    if (v.group_previous || v.group_next) {
      nav.append(MF.el("span", { id: "group-nav" }, " · group: ", near(v.group_previous, "group-prev", "← previous"), " · ", near(v.group_next, "group-next", "next →")));
    }
    const others = v.attempts.filter((a) => a.has_trajectory && !a.this);
    if (others.length) {
      const box = MF.el("span", { id: "other-attempts" }, " · other attempts:");
      others.forEach((a) => box.append(" ", MF.link(`/trajectory?id=${encodeURIComponent(v.task)}&attempt=${a.number}`, `#${a.number}` + (a.final ? " (result)" : ""))));
      nav.append(box);
    }
  },

  banner(v) {
    const t = v.trajectory, good = v.outcome === "resolved";
    const b = document.getElementById("banner");
    b.className = "banner " + (good ? "ok" : v.errored ? "bad" : "warn");
    const at = v.attempt, which = at.of > 1 ? `attempt ${at.number} of ${at.of}` + (at.final ? " (the task's)" : " (retried)") : `attempt ${at.number}`;
    b.append(MF.el("strong", { id: "outcome", text: v.outcome }), ` · reward ${MF.num(v.reward)} · ${v.type} · `, MF.el("span", { id: "attempt" }, which), ` · ${t.steps.length} steps` +
      (t.ended_at ? ` · ${MF.secs(t.ended_at - t.started_at)}` : ""));
    if (v.error) b.append(MF.el("div", { id: "banner-error", text: v.error }));
  },
};

(async () => {
  const taskId = MF.param("id");
  document.getElementById("title").textContent = taskId;
  document.getElementById("live").textContent = "";
  try {
    const attempt = MF.param("attempt");
    const v = await MF.get("/api/trajectory?id=" + encodeURIComponent(taskId) + (attempt ? "&attempt=" + encodeURIComponent(attempt) : ""));
    const t = v.trajectory;
    TJ.banner(v);
    TJ.nav(v);
    TJ.group(v.group_rewards);
    if (v.sample) TJ.tokens(v.sample, v);
    TT.render(document.getElementById("prompt-section"), document.getElementById("steps"), t.steps, t.started_at);
    // no step at all: say why, not an empty list of turns
    if (v.no_turns) document.getElementById("steps").append(MF.el("p", { id: "no-turns", class: "notice", text: v.no_turns }));
  } catch (err) { MF.fail(err); }
})();
