// The trajectory page: outcome banner, the GRPO group, decoded tokens, one box per turn.
"use strict";

const TJ = {
  // Content of a message or tool argument as text (a list of parts joined).
  text(content) {
    if (Array.isArray(content)) return content.map((c) => c.text ?? JSON.stringify(c)).join("\n");
    return content ?? "";
  },

  looksLikeDiff(s) { return typeof s === "string" && (/^(diff --git|--- |\+\+\+ )/m.test(s) && /^@@ /m.test(s)); },

  diff(text) {
    const pre = MF.el("pre", { class: "diff" });
    for (const line of text.split("\n")) {
      const cls = line.startsWith("+++") || line.startsWith("---") ? "file" :
        line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.append(MF.el("span", { class: cls }, line + "\n"));
    }
    return pre;
  },

  // Tool arguments: JSON strings parsed, each value on its own, a patch as a diff.
  args(raw) {
    let args = raw;
    if (typeof raw === "string") { try { args = JSON.parse(raw); } catch { return MF.el("pre", { text: raw }); } }
    if (!args || typeof args !== "object") return MF.el("pre", { text: String(args) });
    const box = MF.el("div", { class: "args" });
    for (const [k, v] of Object.entries(args)) {
      const body = TJ.looksLikeDiff(v) ? TJ.diff(v) : MF.el("pre", { text: typeof v === "string" ? v : JSON.stringify(v, null, 2) });
      box.append(MF.el("div", { class: "arg-name", text: k }), body);
    }
    return box;
  },

  message(m) {
    const box = MF.el("div", { class: "msg " + (m.role || "") });
    box.append(MF.el("div", { class: "role", text: m.role || "?" }), MF.el("pre", { text: TJ.text(m.content) }));
    for (const call of m.tool_calls || []) box.append(MF.el("div", { class: "tool", text: `tool call ${call.function?.name}` }), TJ.args(call.function?.arguments));
    return box;
  },

  replies(s) {
    const r = s.response || {};
    if (r.choices) return r.choices.map((c) => c.message || { role: "assistant", content: c.text });
    return r.message ? [r.message] : [];
  },

  // Steps cut into turns: a model call and the actions and observations that follow it.
  turns(steps) {
    const out = [];
    for (const s of steps) {
      if (s.kind === "model_call" || !out.length) out.push([]);
      out[out.length - 1].push(s);
    }
    return out;
  },

  turn(steps, n, t0) {
    const box = MF.el("div", { class: "turn step" });
    const first = steps[0], took = steps.reduce((a, s) => a + (s.duration_s || 0), 0);
    box.append(MF.el("span", { class: "time", text: `+${MF.num(first.started_at - t0, 1)} s, took ${MF.num(took, 3)} s` }));
    const call = first.kind === "model_call" ? first : null;
    const head = call ? `turn ${n}: model call (${call.prompt_token_ids?.length ?? call.prompt_tokens} prompt + ${call.token_ids?.length ?? call.completion_tokens} completion tokens` +
      (call.weights_version !== null ? `, weights v${call.weights_version})` : ")") : `turn ${n}`;
    box.append(MF.el("div", { class: "kind", text: head }));
    const actions = steps.filter((s) => s.kind === "action");
    if (call) {
      const msgs = call.request.messages || [];
      if (msgs.length) {
        const d = MF.el("details", {}, MF.el("summary", { text: `${msgs.length} messages in` }));
        msgs.forEach((m) => d.append(TJ.message(m)));
        box.append(d);
      }
      for (const m of TJ.replies(call)) {
        const shown = actions.length ? { ...m, tool_calls: [] } : m;  // the actions below show the calls
        if (TJ.text(shown.content) || (shown.tool_calls || []).length) box.append(TJ.message(shown));
      }
    }
    for (const s of steps.slice(call ? 1 : 0)) {
      if (s.kind === "action") box.append(MF.el("div", { class: "tool action", text: `action ${s.tool}` }), TJ.args(s.arguments));
      else if (s.kind === "observation") {
        const label = "observation" + (s.exit_code !== null ? ` (exit ${s.exit_code})` : "") + (s.truncated ? ", truncated" : "");
        box.append(MF.el("div", { class: "tool observation" + (s.exit_code ? " bad" : ""), text: label }), MF.el("pre", { class: "obs", text: s.content }));
      } else if (s.kind === "model_call") box.append(MF.el("div", { class: "kind", text: "model call" }));
    }
    return box;
  },

  // Tokens as text, coloured by logprob; id, logprob, mask and text on hover.
  tokens(sample) {
    const box = document.getElementById("sample");
    box.append(MF.el("h2", { text: "Train sample tokens" }));
    if (sample.problem) { box.append(MF.el("p", { class: "error", text: "no token sequence: " + sample.problem })); return; }
    const inLoss = sample.loss_mask.reduce((a, b) => a + b, 0);
    box.append(MF.el("p", { text: `${sample.prompt_ids.length} prompt tokens, ${sample.completion_ids.length} after them (${inLoss} generated, in the loss); weights v${sample.weights_version}. ` +
      "Generated tokens are coloured by probability (green near 1, red low); grey ones are fed back (mask 0). " +
      (sample.decoded_by ? `Decoded with ${sample.decoded_by}.` : `Ids only: ${sample.not_decoded}.`) }));
    const show = (text, id) => (text === null || text === undefined ? `[${id}]` : text);
    const prompt = MF.el("details", { id: "prompt-box" }, MF.el("summary", { text: `prompt (${sample.prompt_ids.length} tokens)` }));
    const pdiv = MF.el("div", { class: "tokens", id: "prompt-tokens" });
    sample.prompt_ids.forEach((id, j) => pdiv.append(MF.el("span", { class: "prompt", title: `id ${id} (prompt)` }, show(sample.prompt_text?.[j], id))));
    prompt.append(pdiv);
    const div = MF.el("div", { class: "tokens", id: "tokens" });
    sample.completion_ids.forEach((id, j) => {
      const lp = sample.logprobs[j], m = sample.loss_mask[j];
      const span = MF.el("span", { title: `id ${id} · logprob ${lp.toFixed(3)} · mask ${m}`, "data-mask": m, "data-id": id }, show(sample.completion_text?.[j], id));
      if (m) span.style.background = `hsl(${Math.round(120 * Math.exp(lp))}, 70%, 80%)`; else span.className = "fed";
      div.append(span);
    });
    box.append(prompt, MF.el("div", { class: "kind", text: "completion" }), div);
  },

  group(g, current) {
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

  banner(v) {
    const t = v.trajectory, good = v.outcome === "resolved";
    const b = document.getElementById("banner");
    b.className = "banner " + (good ? "ok" : v.errored ? "bad" : "warn");
    const at = v.attempt, which = at.of > 1 ? `attempt ${at.number} of ${at.of}` + (at.final ? " (the result's)" : " (retried)") : `attempt ${at.number}`;
    b.append(MF.el("strong", { id: "outcome", text: v.outcome }), ` · reward ${MF.num(v.reward)} · ${v.type} · `, MF.el("span", { id: "attempt" }, which), ` · ${t.steps.length} steps` +
      (t.ended_at ? ` · ${MF.secs(t.ended_at - t.started_at)}` : ""));
    if (v.error) b.append(MF.el("div", { id: "banner-error", text: v.error }));
    const nav = document.getElementById("nav");
    nav.append(MF.link(MF.taskHref(v.task), "task"), " · ", MF.link(MF.runHref(v.run), "run"), " · ");
    const near = (id, which, text) => (id ? MF.el("a", { id: which, href: "/trajectory?id=" + encodeURIComponent(id) }, text) : MF.el("span", { id: which, class: "off" }, text));
    nav.append(near(v.previous, "prev", "← previous"), " · ", near(v.next, "next", "next →"));
    const others = v.attempts.filter((a) => a.has_trajectory && !a.this);
    if (others.length) {
      const box = MF.el("span", { id: "other-attempts" }, " · other attempts:");
      others.forEach((a) => box.append(" ", MF.link(`/trajectory?id=${encodeURIComponent(v.task)}&attempt=${a.number}`, `#${a.number}` + (a.final ? " (result)" : ""))));
      nav.append(box);
    }
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
    TJ.group(v.group_rewards);
    if (v.sample) TJ.tokens(v.sample);
    const steps = document.getElementById("steps");
    TJ.turns(t.steps).forEach((turn, i) => steps.append(TJ.turn(turn, i + 1, t.started_at)));
  } catch (err) { MF.fail(err); }
})();
