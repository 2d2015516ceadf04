// The trajectory page's turns: the prompt once, then one compact box per model call with
// what the model said, each tool call on a line (edits and patches as diffs) and its output.
"use strict";

const TT = {
  // Content of a message as text (a list of parts joined).
  text(content) {
    if (Array.isArray(content)) return content.map((c) => c.text ?? JSON.stringify(c)).join("\n");
    return content ?? "";
  },

  looksLikeDiff(s) { return typeof s === "string" && /^(diff --git|--- |\+\+\+ )/m.test(s) && /^@@ /m.test(s); },

  diff(text) {
    const pre = MF.el("pre", { class: "diff" });
    for (const line of text.replace(/\n$/, "").split("\n")) {
      const cls = line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git") ? "file" :
        line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.append(MF.el("span", { class: cls }, line + "\n"));
    }
    return pre;
  },

  // An edit (old_str -> new_str) as a diff: the lines both share around the change as
  // context, the old lines removed, the new ones added.
  editDiff(path, oldText, newText) {
    const a = String(oldText ?? "").split("\n"), b = String(newText ?? "").split("\n");
    let head = 0;
    while (head < a.length && head < b.length && a[head] === b[head]) head++;
    let tail = 0;
    while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
    const lines = [`--- a/${path}`, `+++ b/${path}`, "@@ edit @@",
      ...a.slice(0, head).map((l) => " " + l),
      ...a.slice(head, a.length - tail).map((l) => "-" + l),
      ...b.slice(head, b.length - tail).map((l) => "+" + l),
      ...a.slice(a.length - tail).map((l) => " " + l)];
    return TT.diff(lines.join("\n"));
  },

  block(text) { return TT.looksLikeDiff(text) ? TT.diff(text) : MF.el("pre", { text }); },

  // One tool call: its name and short arguments on one line, long ones (a file's content,
  // a patch, a multi-line command) below it, an edit as a diff.
  call(tool, raw) {
    let args = raw;
    if (typeof raw === "string") { try { args = JSON.parse(raw); } catch { args = { raw }; } }
    if (!args || typeof args !== "object" || Array.isArray(args)) args = { value: args };
    const line = MF.el("div", { class: "act" }, MF.el("span", { class: "tool-name", text: tool || "?" }));
    const below = [];
    if (tool === "edit" && "old_str" in args && "new_str" in args) {
      line.append(" ", MF.el("code", { text: String(args.path ?? "") }));
      return [line, TT.editDiff(String(args.path ?? ""), args.old_str, args.new_str)];
    }
    for (const [k, v] of Object.entries(args)) {
      const s = typeof v === "string" ? v : JSON.stringify(v, null, 2);
      if (!s.includes("\n") && s.length <= 160) {
        const one = Object.keys(args).length === 1 && ["command", "path", "value"].includes(k);
        line.append(" ", ...(one ? [] : [MF.el("span", { class: "arg-name", text: k + "=" })]), MF.el("code", { text: s }));
      } else below.push(MF.el("div", { class: "arg-name", text: k }), TT.block(s));
    }
    return [line, ...below];
  },

  observation(s) {
    const label = (s.exit_code !== null && s.exit_code !== undefined ? `exit ${s.exit_code}` : "output") + (s.truncated ? ", truncated" : "");
    const out = TT.block(s.content);
    out.classList.add("obs");
    if (s.exit_code) out.classList.add("bad");
    out.prepend(MF.el("span", { class: "obs-label", text: label }));
    return out;
  },

  message(m) {
    const box = MF.el("div", { class: "msg " + (m.role || "") });
    box.append(MF.el("span", { class: "role", text: m.role || "?" }), MF.el("pre", { text: TT.text(m.content) }));
    for (const call of m.tool_calls || []) box.append(...TT.call(call.function?.name, call.function?.arguments));
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

  // The first model call's messages: the system prompt and the task, shown once.
  prompt(steps) {
    const first = steps.find((s) => s.kind === "model_call");
    const msgs = first?.request?.messages || [];
    if (!msgs.length) return null;
    const box = MF.el("details", { id: "prompt", open: "" },
      MF.el("summary", { text: `${msgs.length} messages: ${msgs.map((m) => m.role).join(", ")}` }));
    msgs.forEach((m) => box.append(TT.message(m)));
    return box;
  },

  // Messages a call's request adds to the last one's that are neither the model's answer
  // nor a tool's output: what the agent told the model without running a tool (a
  // malformed answer's error), shown when the turn before ran no tool.
  fedBack(call, before, ranTool) {
    const now = call.request?.messages || [], prev = before?.request?.messages;
    if (!prev || ranTool) return [];
    return now.slice(prev.length).filter((m) => m.role !== "assistant" && m.role !== "tool");
  },

  turn(steps, n, t0, before, ranTool) {
    const box = MF.el("div", { class: "turn step" });
    const first = steps[0], took = steps.reduce((a, s) => a + (s.duration_s || 0), 0);
    const call = first.kind === "model_call" ? first : null;
    const head = call ? `turn ${n}: model call (${call.prompt_token_ids?.length ?? call.prompt_tokens} prompt + ${call.token_ids?.length ?? call.completion_tokens} completion tokens` +
      (call.weights_version !== null && call.weights_version !== undefined ? `, weights v${call.weights_version})` : ")") : `turn ${n}`;
    box.append(MF.el("div", { class: "kind" }, head, MF.el("span", { class: "time", text: `+${MF.num(first.started_at - t0, 1)} s, took ${MF.num(took, 3)} s` })));
    const actions = steps.filter((s) => s.kind === "action");
    if (call) {
      for (const m of TT.fedBack(call, before, ranTool)) box.append(TT.message(m));
      // a call that got no usable answer keeps the client's error in place of one
      if (call.response?.error) box.append(MF.el("div", { class: "obs-none call-failed", text: `no answer: ${call.response.error}` }));
      for (const m of TT.replies(call)) {
        const said = TT.text(m.content);
        if (said.trim()) box.append(MF.el("pre", { class: "say", text: said }));
        if (!actions.length) for (const c of m.tool_calls || []) box.append(...TT.call(c.function?.name, c.function?.arguments));
      }
    }
    for (const s of steps.slice(call ? 1 : 0)) {
      if (s.kind === "action") box.append(...TT.call(s.tool, s.arguments));
      else if (s.kind === "observation") box.append(TT.observation(s));
    }
    return box;
  },

  render(promptBox, target, steps, t0) {
    const prompt = TT.prompt(steps);
    if (prompt) promptBox.append(MF.el("h2", { text: "Prompt" }), prompt);
    let before = null, ranTool = false;
    TT.turns(steps).forEach((turn, i) => {
      target.append(TT.turn(turn, i + 1, t0, before, ranTool));
      if (turn[0].kind === "model_call") before = turn[0];
      ranTool = turn.some((s) => s.kind === "observation");
    });
    if (steps.length && steps[steps.length - 1].kind === "action") {  // cut off while it ran
      target.lastChild.append(MF.el("div", { class: "obs-none", text: "no output: the attempt ended while this call ran" }));
    }
  },
};
