// agentstate console: live updates of a session page (server-sent events) and the spill
// page's refresh. Everything agents wrote goes into the page as text (textContent), never
// as markup.
"use strict";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function utc(ms) {
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}

function meta(parts, at) {
  const line = el("div", "meta");
  for (const [cls, text] of parts) line.appendChild(el("span", cls, text));
  line.appendChild(el("time", null, utc(at)));
  return line;
}

function messageItem(m) {
  const note = m.name === "compact_note";
  const li = el("li", "item msg fresh role-" + m.role + (note ? " note" : ""));
  li.dataset.seq = m.seq;
  const parts = [["seq", "#" + m.seq], ["role", m.role]];
  if (m.name) parts.push(["name", m.name]);
  if (m.round_index !== undefined && m.round_index !== null) parts.push(["round", "round " + m.round_index]);
  li.appendChild(meta(parts, m.created_at));
  if (m.content !== undefined && m.content !== null) li.appendChild(el("pre", "content", m.content));
  if (m.tool_calls) li.appendChild(el("pre", "json", JSON.stringify(m.tool_calls, null, 2)));
  return li;
}

function decisionItem(d) {
  const li = el("li", "item decision fresh");
  li.dataset.decision = d.id;
  li.appendChild(meta([["role", "decision"]], d.created_at));
  li.appendChild(el("div", "decision-text", d.decision));
  li.appendChild(el("div", "small", "why: " + d.rationale));
  if (d.planned_action) li.appendChild(el("div", "small", "plan: " + d.planned_action));
  const outcome = el("div", "outcome");
  outcome.appendChild(el("span", "pending", "waiting for its outcome"));
  li.appendChild(outcome);
  return li;
}

function setOutcome(li, text) {
  const box = li.querySelector(".outcome");
  box.textContent = "outcome: ";
  box.appendChild(el("span", "outcome-text", text));
}

function follow(timeline) {
  const state = document.getElementById("live-state");
  const count = document.getElementById("msg-count");
  const source = new EventSource(timeline.dataset.live);
  source.onopen = () => { if (state) state.textContent = "live: new messages appear as they are written"; };
  source.onerror = () => { if (state) state.textContent = "reconnecting…"; };
  source.addEventListener("message", (e) => {
    const m = JSON.parse(e.data);
    if (timeline.querySelector('li[data-seq="' + m.seq + '"]')) return;
    timeline.appendChild(messageItem(m));
    if (count) count.textContent = timeline.querySelectorAll("li.msg").length + " messages";
  });
  source.addEventListener("decision", (e) => {
    const d = JSON.parse(e.data);
    if (!timeline.querySelector('li[data-decision="' + CSS.escape(d.id) + '"]')) timeline.appendChild(decisionItem(d));
  });
  source.addEventListener("outcome", (e) => {
    const o = JSON.parse(e.data);
    const li = timeline.querySelector('li[data-decision="' + CSS.escape(o.decision_id) + '"]');
    if (li) setOutcome(li, o.outcome);
  });
  source.addEventListener("gone", () => {
    source.close();
    if (state) state.textContent = "no longer live in Redis (expired or closed): reload for its durable history";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const timeline = document.querySelector("ol#timeline[data-live]");
  if (timeline) follow(timeline);
  const refresh = document.querySelector("[data-refresh]");
  if (refresh) setTimeout(() => location.reload(), Number(refresh.dataset.refresh) * 1000);
});
