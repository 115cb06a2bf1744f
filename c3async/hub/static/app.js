// c3async Hub. Every piece of transcript text is set with textContent, never parsed as HTML.
// The API is called with the Hub's HttpOnly cookie (set when the URL `c3async hub` printed was
// opened); this script never sees the token. State changes add X-C3-Request: 1, which a
// cross-site form cannot send.
"use strict";

const state = { project: "", filter: "all", q: "", projects: [], rows: new Map(), open: new Set(), loading: 0 };
const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

const SIGN_IN = "The Hub no longer knows this page (it was restarted?): open the URL `c3async hub` printed.";

async function api(path, options = {}) {
  const headers = { "Accept": "application/json", ...(options.headers || {}) };
  if (options.body !== undefined) { headers["Content-Type"] = "application/json"; headers["X-C3-Request"] = "1"; }
  const res = await fetch(path, { ...options, headers, credentials: "same-origin",
                                  body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  if (res.status === 401) throw new Error(SIGN_IN);
  const data = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  return data;
}

function age(iso) {
  const t = Date.parse(iso || "");
  if (!t) return "";
  const s = Math.max(0, (Date.now() - t) / 1000);
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= size) return `${Math.floor(s / size)}${unit} ago`;
  return `${Math.floor(s)}s ago`;
}

function activity(row) { return Date.parse(row.last_activity || row.mtime || "") || 0; }

function renderRail() {
  const ul = $("#projects");
  ul.replaceChildren(el("li", {}, el("button", { type: "button", "data-project": "", class: state.project ? "" : "on", text: "All projects", onclick: () => choose("") })));
  for (const p of state.projects) {
    const button = el("button", { type: "button", "data-project": p.path, title: p.path, class: state.project === p.path ? "on" : "", text: p.name, onclick: () => choose(p.path) });
    if (p.live) button.append(el("span", { class: "live-count", title: `${p.live} live`, text: ` ● ${p.live}` }));
    ul.append(el("li", {}, button));
  }
}

function choose(project) { state.project = project; state.open.clear(); renderRail(); load(); }

// Renders are coalesced to one per frame: project responses arrive one by one.
let renderQueued = false;
function renderRows() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; renderNow(); });
}

function renderNow() {
  const ul = $("#rows");
  const rows = [...state.rows.values()].sort((a, b) => activity(b) - activity(a));
  $("#empty").hidden = rows.length > 0 || state.loading > 0;
  const keep = new Map([...ul.children].map(li => [li.dataset.id, li]));
  // Existing <li> nodes are kept and moved only where the order changed, so an open detail
  // (and whatever is being typed in it) survives a refresh.
  let cursor = ul.firstElementChild;
  for (const row of rows) {
    let li = keep.get(row.id);
    keep.delete(row.id);
    if (!li) li = $("#row-template").content.firstElementChild.cloneNode(true);
    fillRow(li, row);
    if (li === cursor) cursor = cursor.nextElementSibling;
    else ul.insertBefore(li, cursor);
  }
  for (const li of keep.values()) li.remove();
}

function fillRow(li, row) {
  li.dataset.id = row.id;
  li.dataset.project = row.project;
  li.classList.toggle("live", !!row.live);
  li.classList.toggle("stale", !!row.stale);
  $(".dot", li).title = row.live ? "live" : "not live";
  const title = $(".title", li);
  title.textContent = row.title;
  title.title = row.id;
  title.onclick = () => toggle(li, row);
  const pill = $(".live-pill", li);
  pill.hidden = !row.live;
  pill.textContent = row.mcp_count > 1 ? `LIVE MCP×${row.mcp_count}` : "LIVE";
  $(".branch", li).textContent = row.branch || "";
  $(".branch", li).hidden = !row.branch;
  $(".project", li).textContent = state.project ? "" : row.project.split("/").pop();
  const chips = $(".chips", li);
  chips.replaceChildren(...(row.stale ? [el("span", { class: "chip stale", text: `stale: ${row.stale.reason}` })]
    : row.hints.map(h => el("span", { class: "chip", text: h }))));
  const l = row.links || {};
  const counts = [];
  if (l.tasks && l.tasks.length) counts.push(`${l.tasks.length} task${l.tasks.length > 1 ? "s" : ""}`);
  if (l.decisions && l.decisions.length) counts.push(`${l.decisions.length} decision${l.decisions.length > 1 ? "s" : ""}`);
  if (l.snapshot) counts.push("snapshot");
  $(".counts", li).textContent = counts.join(" · ");
  $(".age", li).textContent = age(row.last_activity || row.mtime);
  $(".resume", li).onclick = () => showResume(li, row);
  if (state.open.has(row.id) && $(".detail", li).hidden) openDetail(li, row);
}

async function showResume(li, row) {
  const detail = $(".detail", li);
  if (detail.hidden) await toggle(li, row);
  const cmd = $(".cmd", detail);
  if (cmd) cmd.scrollIntoView({ block: "nearest" });
  try { await navigator.clipboard.writeText(row.resume); flash(li, "resume command copied"); }
  catch { flash(li, "select the command to copy it"); }
}

function flash(li, text) {
  const status = $("#status");
  status.textContent = text;
  clearTimeout(flash.timer);
  flash.timer = setTimeout(() => { status.textContent = ""; }, 2500);
}

async function toggle(li, row) {
  const detail = $(".detail", li);
  if (!detail.hidden) { detail.hidden = true; state.open.delete(row.id); return; }
  state.open.add(row.id);
  await openDetail(li, row);
}

async function openDetail(li, row) {
  const detail = $(".detail", li);
  detail.hidden = false;
  detail.replaceChildren(el("p", { class: "counts", text: "loading…" }));
  try {
    const d = await api(`/api/sessions/${encodeURIComponent(row.id)}?project=${encodeURIComponent(row.project)}`);
    detail.replaceChildren(...detailNodes(d, li));
  } catch (e) {
    detail.replaceChildren(el("p", { class: "error", text: e.message }));
  }
}

function section(title, ...nodes) { return [el("h3", { text: title }), ...nodes]; }

function detailNodes(d, li) {
  const r = d.row;
  const out = [];
  out.push(...section("First prompt", el("pre", { text: r.first_prompt || "—" })));
  out.push(...section("Last prompt", el("pre", { text: r.last_prompt || "—" })));
  if (r.note) out.push(...section("Note", el("pre", { text: `${r.note.summary || ""}${r.note.next_steps ? "\nNext: " + r.note.next_steps : ""}` })));
  else if (d.last_snapshot) out.push(...section("Last snapshot", el("pre", { text: d.last_snapshot.summary })));
  if (r.links.tasks.length) out.push(...section("Tasks", ...r.links.tasks.map(t => el("div", { text: `${t.id.slice(0, 8)} · ${t.status} · ${t.title}` }))));
  if (r.links.decisions.length) out.push(...section("Decisions", ...r.links.decisions.slice(-5).map(x => el("div", { text: x.text }))));
  const links = d.row.chain;
  if (links.predecessors.length || links.successors.length) {
    const chain = el("div", { class: "chain" });
    for (const [label, ids] of [["← ", links.predecessors], ["→ ", links.successors]]) {
      for (const id of ids) chain.append(el("a", { href: "#", text: label + id.slice(0, 8), onclick: (e) => { e.preventDefault(); jump(id); } }));
    }
    out.push(...section("Chain", chain));
  }
  if (d.turns.length) out.push(...section("Last turns", ...d.turns.map(t => el("div", { class: "turn" }, el("b", { text: t.role }), document.createTextNode(t.text)))));
  out.push(...section("Resume", el("code", { class: "cmd", text: r.resume })));
  out.push(actions(r, li));
  return out;
}

function jump(id) {
  const li = [...$("#rows").children].find(x => x.dataset.id === id);
  if (li) { li.scrollIntoView({ block: "center" }); const row = state.rows.get(id); if (row && $(".detail", li).hidden) toggle(li, row); }
}

function actions(r, li) {
  const reason = el("input", { placeholder: "why stale (required)", "aria-label": "stale reason" });
  const successor = el("input", { placeholder: "successor id (optional)", "aria-label": "successor" });
  const summary = el("input", { placeholder: "note: what was done", "aria-label": "note summary" });
  const next = el("input", { placeholder: "next steps", "aria-label": "next steps" });
  const msg = el("span", { class: "counts" });
  const send = async (body) => {
    msg.className = "counts"; msg.textContent = "saving…";
    try {
      await api(`/api/sessions/${encodeURIComponent(r.id)}/marks`, { method: "POST", body: { project: r.project, ...body } });
      await load();
      const row = state.rows.get(r.id);
      if (row) await openDetail(li, row);  // show the new state (and Unstale after a stale)
      flash(li, "saved");
    } catch (e) { msg.className = "error"; msg.textContent = e.message; }
  };
  const box = el("div", { class: "actions" });
  if (r.stale) box.append(el("button", { type: "button", class: "unstale", text: "Unstale", onclick: () => send({ op: "unstale" }) }));
  else box.append(reason, successor, el("button", { type: "button", class: "mark-stale", text: "Mark stale", onclick: () => send({ op: "stale", reason: reason.value, successor: successor.value || null }) }));
  box.append(summary, next, el("button", { type: "button", class: "save-note", text: "Save note", onclick: () => send({ op: "note", summary: summary.value, next_steps: next.value }) }), msg);
  return box;
}

let generation = 0;
async function load() {
  const gen = ++generation;
  const params = new URLSearchParams({ filter: state.filter });
  if (state.q) params.set("q", state.q);
  try {
    state.projects = (await api("/api/projects")).projects;
  } catch (e) { $("#progress").textContent = e.message; return; }
  renderRail();
  const targets = state.project ? [state.project] : state.projects.map(p => p.path);
  const wanted = new Set(targets);
  for (const [id, row] of state.rows) if (!wanted.has(row.project)) state.rows.delete(id);
  let done = 0;
  state.loading = targets.length;
  const progress = () => { $("#progress").textContent = done < targets.length ? `loading ${done}/${targets.length} projects…` : `${state.rows.size} sessions`; };
  progress();
  // One request per project, so the first listing fills in as each project finishes; a
  // project's rows are replaced only when its own answer arrives.
  await Promise.all(targets.map(async (p) => {
    try {
      const data = await api(`/api/sessions?${params}&project=${encodeURIComponent(p)}`);
      if (gen !== generation) return;
      for (const [id, row] of state.rows) if (row.project === p) state.rows.delete(id);
      for (const row of data.rows) state.rows.set(row.id, row);
    } catch (e) { $("#progress").textContent = e.message; }
    done += 1;
    state.loading -= 1;
    if (gen !== generation) return;
    progress();
    renderRows();
  }));
  if (gen === generation && targets.length === 0) { state.rows = new Map(); state.loading = 0; progress(); renderRows(); }
}

function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#filters button")) {
    b.addEventListener("click", () => {
      state.filter = b.dataset.filter;
      for (const x of document.querySelectorAll("#filters button")) x.classList.toggle("on", x === b);
      load();
    });
  }
  $("#search").addEventListener("input", debounce(e => { state.q = e.target.value.trim(); load(); }, 250));
  const reload = debounce(load, 300);
  const events = new EventSource("/api/events");
  events.addEventListener("change", reload);
  load();
});
