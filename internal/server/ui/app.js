// The page of cordon serve: pending approvals, sandboxes and their
// sessions, an audit review of one sandbox with what the agent did
// beside what it was shown, and the change set of a reviewed workspace. Everything comes from the JSON API with the
// admin token; nothing from the API is ever parsed as HTML.
"use strict";

const $ = (sel) => document.querySelector(sel);

// safe shows text the API carries (an agent's, a tool server's, a file's
// name or content) with every control and invisible format character, the
// bidirectional overrides among them, as a \u escape, line feeds and tabs
// kept: what would reorder or hide text is seen, never obeyed.
function safe(s) {
  return String(s).replace(/[\p{Cc}\p{Cf}\p{Co}\p{Cs}\u2028\u2029]/gu,
    (c) => c === "\n" || c === "\t" ? c : "\\u" + c.codePointAt(0).toString(16).padStart(4, "0"));
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" || typeof c === "number" ? safe(c) : c);
  }
  return e;
}

function token() { return sessionStorage.getItem("cordon-token") || ""; }

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + token() } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    if (resp.status === 401) { sessionStorage.removeItem("cordon-token"); show(); }
    throw new Error(data.error || resp.statusText);
  }
  return data;
}

function decode(b64) {
  if (!b64) return "";
  try { return new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))); }
  catch { return "(not text)"; }
}

function fail(err) {
  const p = $("#error");
  p.textContent = safe(err.message || err);
  p.hidden = false;
}

// files are the files a held call was decided on, as the approver must see
// them: the call is refused if a path names another file when it runs.
function files(fs) {
  const names = Object.keys(fs || {}).sort();
  if (names.length === 0) return [];
  return [el("p", {}, "Files, as decided (the call is refused if a path names another file when it runs):"),
    el("ul", {}, ...names.map((a) => {
      const f = fs[a];
      const what = !f.exists ? "a new file (in the directory of" : f.dir ? "the directory (of" : "the file (of";
      return el("li", { class: "file" }, `${a}: ${f.path}, ${what} device ${f.dev}, inode ${f.ino})${f.links > 1 ? `, which has ${f.links} names` : ""}`);
    }))];
}

async function approvals() {
  const list = await api("GET", "/v1/approvals");
  const box = $("#approvals");
  box.replaceChildren();
  $("#no-approvals").hidden = list.length > 0;
  for (const it of list) {
    const reason = el("input", { name: "reason", placeholder: "reason", size: "30" });
    const decide = (verb) => async () => {
      try {
        const done = await api("POST", `/v1/approvals/${encodeURIComponent(it.id)}/${verb}`, { reason: reason.value });
        box.prepend(el("p", { class: "note" }, `${done.state} ${done.id} (${done.tool}) by ${done.by}`));
        setTimeout(refresh, 500);
      } catch (e) { fail(e); }
    };
    box.append(el("div", { class: "approval", "data-id": it.id },
      el("h3", {}, `${it.tool} (${it.class}${it.reversible ? "" : ", cannot be undone"}) for ${it.agent || "an agent"}`),
      el("p", {}, it.reason || ""),
      el("pre", {}, JSON.stringify(it.args, null, 2)),
      ...files(it.files),
      reason, " ",
      el("button", { class: "approve", onclick: decide("approve") }, "Approve"), " ",
      el("button", { class: "deny", onclick: decide("deny") }, "Deny")));
  }
}

async function sandboxes() {
  const list = await api("GET", "/v1/sandboxes");
  const body = $("#sandboxes tbody");
  body.replaceChildren();
  for (const sb of list) {
    const s = sb.session || {};
    const row = el("tr", { class: "sandbox" + (sb.state === "ended" ? " ended" : ""), "data-id": sb.id, onclick: () => review(sb.id, sb.reviewed) },
      el("td", {}, sb.id), el("td", {}, sb.agent), el("td", {}, sb.node || ""),
      el("td", {}, sb.state === "ended" ? `ended (${sb.ended})` : "running"),
      el("td", {}, sb.warm ? "yes" : "no"), el("td", {}, sb.commands),
      el("td", {}, s.steps || 0), el("td", {}, s.bytes_out || 0), el("td", {}, s.denials || 0),
      el("td", {}, s.checkpoint || ""));
    body.append(row);
  }
}

// review lays out a sandbox's audit records as steps: each action (a
// command, a file read or write) beside what came back of it.
async function review(id, reviewed) {
  const recs = await api("GET", `/v1/audit?sandbox=${encodeURIComponent(id)}&limit=2000`);
  $("#review").hidden = false;
  $("#review-id").textContent = safe(id);
  $("#changes").hidden = !reviewed;
  if (reviewed) changeSet(id).catch(fail);
  const steps = $("#steps");
  steps.replaceChildren();
  let cur = null;
  const start = (did) => {
    cur = { did: el("div", { class: "did" }, did), saw: el("div", { class: "saw" }) };
    steps.append(el("div", { class: "step" }, cur.did, cur.saw));
  };
  for (const r of recs) {
    const d = r.data || {};
    switch (r.type) {
      case "start":
        start(el("h3", {}, `claimed by ${d.token} (${d.warm ? "pre-warmed" : "built on demand"}), profile ${d.profile}`));
        break;
      case "exec":
        start(el("div", {}, el("h3", {}, "command"), el("pre", { class: "argv" }, (d.argv || []).join(" "))));
        break;
      case "file_read": case "file_write":
        start(el("div", {}, el("h3", {}, r.type === "file_read" ? "download" : "upload"), el("pre", {}, d.path)));
        break;
      case "result":
        if (cur) cur.saw.append(el("h3", {}, `${d.stream} (${d.bytes} bytes${d.captured < d.bytes ? `, first ${d.captured} kept` : ""})`),
          el("pre", { class: "output " + d.stream }, d.head !== undefined ? d.head : "(not text: " + (d.head_base64 || "") + ")"));
        break;
      case "outcome":
        if (cur) cur.saw.append(el("p", { class: d.status === "ok" ? "status-ok" : "status-bad" }, `${d.status}: ${d.message}`));
        break;
      case "network":
        if (cur) cur.saw.append(el("p", {}, `network ${d.decision} ${d.host}:${d.port} ${d.reason || ""}`));
        break;
      case "files.read": case "files.write":
        if (cur) cur.saw.append(el("p", { class: d.status === 200 ? "status-ok" : "status-bad" }, `${d.status}, ${d.bytes} bytes`));
        break;
      case "trajectory_checkpoint":
        steps.append(el("p", { class: "status-bad" }, `checkpoint: ${d.rule} (${d.action}): ${d.reason}`));
        break;
      case "end":
        steps.append(el("p", { class: "hint" }, `ended: ${d.reason}`));
        break;
    }
  }
}

// apiText is api for an answer that is text (a diff).
async function apiText(path) {
  const resp = await fetch(path, { headers: { Authorization: "Bearer " + token() } });
  const text = await resp.text();
  if (!resp.ok) {
    let msg = resp.statusText;
    try { msg = JSON.parse(text).error || msg; } catch { /* not JSON */ }
    throw new Error(msg);
  }
  return text;
}

// changeSet shows the change set of a sandbox of a reviewed workspace
// (captured now while it runs), its diff, and buttons that apply or
// discard exactly the set shown (its digest).
async function changeSet(id) {
  const box = $("#change-set");
  box.replaceChildren(el("p", { class: "hint" }, "Capturing…"));
  const got = await api("GET", `/v1/sandboxes/${encodeURIComponent(id)}/changes`);
  const set = got.set;
  const held = new Map((got.needs_approval || []).map((h) => [h.path, h.rule]));
  const rows = el("tbody");
  for (const c of set.changes) {
    const rule = held.get(c.path);
    rows.append(el("tr", { class: "change " + c.kind },
      el("td", {}, c.kind), el("td", {}, c.type), el("td", {}, c.path + (c.type === "symlink" ? " -> " + (c.target || "") : "")),
      el("td", {}, (c.flags || []).join(", ")),
      el("td", { class: rule ? "status-bad" : "" }, (rule ? `needs approval (${rule})` : "") +
        ((c.obeys || []).length ? `; git would obey: ${c.obeys.join("; ")}` : ""))));
  }
  // What the set does to its repositories, read from its git objects.
  const git = el("div");
  for (const r of (got.git && got.git.repos) || []) {
    const items = el("ul");
    if (r.new) items.append(el("li", {}, "a new repository"));
    for (const c of r.commits || []) {
      const files = (c.files || []).map((f) => f.binary ? `${f.path} (binary)` : `${f.path} +${f.added} -${f.removed}`).join(", ");
      items.append(el("li", {}, `commit ${c.hash.slice(0, 12)} ${c.subject} (${c.author})` + (files ? `: ${files}` : "") + (c.files_note ? ` (${c.files_note})` : "")));
    }
    if (r.packs) items.append(el("li", {}, `${r.packs} new pack(s): the commits in them are not shown`));
    for (const ref of r.refs || []) items.append(el("li", {}, `${ref.name}: ${(ref.old || "(none)").slice(0, 12)} -> ${(ref.new || "(removed)").slice(0, 12)}`));
    for (const n of r.notes || []) items.append(el("li", {}, n));
    git.append(el("p", {}, `git ${r.dir}:`), items);
  }
  const diff = el("pre", { class: "diff" }, "Loading the diff…");
  const result = el("p");
  const post = (verb, body) => async () => {
    try {
      const r = await api("POST", `/v1/sandboxes/${encodeURIComponent(id)}/${verb}`, body);
      if (verb === "discard") result.textContent = safe(`discarded ${r.set} (${r.changes} changes)`);
      else if (r.approval) result.textContent = safe(`held for approval: request ${r.approval}`);
      else result.textContent = `applied ${r.applied.length}, already there ${r.already.length}, refused ${r.refused.length}, conflicts ${r.conflicts.length}`;
      result.className = "status-ok";
    } catch (e) { result.textContent = safe(e.message || e); result.className = "status-bad"; }
  };
  box.replaceChildren(
    el("p", {}, `${got.final ? "Final changes" : "Captured now"}: ${set.changes.length} change(s), ${set.bytes} bytes, set ${set.run}, digest ${set.digest}` +
      (got.needs_approval_total ? `; ${got.needs_approval_total} need approval` : "")),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "kind"), el("th", {}, "type"), el("th", {}, "path"), el("th", {}, "flags"), el("th", {}, "approval"))), rows),
    git,
    el("button", { class: "apply", onclick: post("apply", { digest: set.digest }) }, "Apply this change set"), " ",
    el("button", { class: "discard", onclick: post("discard") }, "Discard"), " ",
    el("button", { onclick: () => changeSet(id).catch(fail) }, "Capture again"),
    result, diff);
  try {
    diff.textContent = safe(await apiText(`/v1/sandboxes/${encodeURIComponent(id)}/changes/diff?digest=${encodeURIComponent(set.digest)}`));
  } catch (e) { diff.textContent = "diff: " + safe(e.message || e); }
}

async function refresh() {
  try {
    $("#error").hidden = true;
    await Promise.all([approvals(), sandboxes()]);
  } catch (e) { fail(e); }
}

function show() {
  const signedIn = token() !== "";
  $("#login").hidden = signedIn;
  $("#main").hidden = !signedIn;
  if (signedIn) refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem("cordon-token", $("#token").value.trim());
    show();
  });
  show();
  setInterval(() => { if (token()) refresh(); }, 5000);
});
