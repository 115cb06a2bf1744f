// c3async Hub. Every piece of transcript text is set with textContent, never parsed as HTML.
//
// The Hub's token. This script runs first in the page's head. The URL `c3async hub` printed
// (/?token=T) brings the token: it is kept at once in this origin's localStorage (the origin is
// http://127.0.0.1:PORT, the port included, so no other server of this machine, nor a Hub on
// another port, can read it) and taken out of the address bar and the history. Every request
// sends it as X-C3-Token; no cookie holds it (cookies ignore ports: every local server would
// get it). A reload or a new tab finds it there; a page without one, or with one the Hub
// refuses (a Hub started since: each start makes a new token), goes to /welcome, which says
// how to get in. State changes also send X-C3-Request: 1, which no form can send.
"use strict";

const TOKEN_KEY = "c3async-hub-token";
const hub = { token: null };  // the URL's token, for this page alone where the storage is refused
(() => {
  const url = new URL(location.href);
  const given = url.searchParams.get("token");
  if (given === null) return;
  url.searchParams.delete("token");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  hub.token = given;
  try { localStorage.setItem(TOKEN_KEY, given); } catch { /* storage turned off: this page only */ }
})();

// The newest token kept (another tab may have opened a newer URL of this Hub), else the URL's.
function token() {
  let kept = null;
  try { kept = localStorage.getItem(TOKEN_KEY); } catch { /* storage turned off */ }
  return kept || hub.token;
}

// To /welcome; `refused`: the token the Hub refused, forgotten (unless a newer one replaced it).
function signOut(refused) {
  if (refused) {
    try { if (localStorage.getItem(TOKEN_KEY) === refused) localStorage.removeItem(TOKEN_KEY); } catch { /* off */ }
    if (hub.token === refused) hub.token = null;
  }
  location.replace(refused ? "/welcome?refused=1" : "/welcome");
}

// A request to the Hub with the token (never a cookie): resolves with [response, the token sent].
function request(path, options = {}) {
  const sent = token();
  const headers = { "Accept": "application/json", ...(sent ? { "X-C3-Token": sent } : {}), ...(options.headers || {}) };
  if (options.body !== undefined) { headers["Content-Type"] = "application/json"; headers["X-C3-Request"] = "1"; }
  return fetch(path, { ...options, headers, credentials: "omit",
                       body: options.body === undefined ? undefined : JSON.stringify(options.body) })
    .then(res => [res, sent]);
}

// What the page shows first, asked for at once (while the page is parsed and its style sheet
// loads): the first page of rows, or the Usage page's two charts (#usage); the first api() of
// the same path takes the answer.
const FIRST_ROWS = "/api/rows?filter=all&cursor=0&limit=100";
const USAGE_VIEW = "#usage";
const FIRST_USAGE = ["/api/usage?by=day&since=30d", "/api/usage?by=window&since=7d"];
const early = new Map();
document.documentElement.classList.toggle("view-usage", location.hash === USAGE_VIEW);  // usage.js's showView
if (token()) {
  for (const path of location.hash === USAGE_VIEW ? FIRST_USAGE : [FIRST_ROWS]) {
    const asked = request(path);
    asked.catch(() => { /* api() sees the failure */ });
    early.set(path, asked);
  }
} else {
  signOut(null);
}

// mode: what the search box searches, "rows" (titles, prompts, notes: the listing) or "text" (the conversations)
const state = { project: "", filter: "all", q: "", tag: "", mode: "rows", sort: "", order: "desc", projects: [], rows: new Map(), open: new Set() };
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

const SIGN_IN = "The Hub refused this page's token (it was restarted?): open the URL `c3async hub` printed.";

async function api(path, options = {}) {
  const asked = options.body === undefined ? early.get(path) : undefined;
  early.delete(path);  // for the first request only: later ones want the data as it is then
  const [res, sent] = await (asked || request(path, options));
  if (res.status === 401) { signOut(sent); throw new Error(SIGN_IN); }
  const data = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error(data.error || `HTTP ${res.status}`);
  return data;
}

// The change stream: server-sent events read with fetch (EventSource cannot send the token's
// header). As with EventSource, `on.open()` when it opens, `on.event(type, data)` for each
// event; a stream cut off (the network, the Hub stopping) is opened again after the server's
// `retry` (2 s), an answer that is not a stream ends it, a refused token signs the page out.
async function follow(path, on) {
  let retry = 2000;
  const pause = () => new Promise(resolve => setTimeout(resolve, retry));
  for (;;) {
    let res, sent;
    try { [res, sent] = await request(path, { headers: { "Accept": "text/event-stream" }, cache: "no-store" }); }
    catch { await pause(); continue; }
    if (res.status === 401) { signOut(sent); return; }
    if (!res.ok || !res.body) return;
    on.open();
    let buffer = "", type = "", data = [];
    try {
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        const end = buffer.endsWith("\r") ? buffer.length - 1 : buffer.length;  // a CR may be half a CRLF
        const lines = buffer.slice(0, end).split(/\r\n|\r|\n/);
        buffer = lines.pop() + buffer.slice(end);
        for (const line of lines) {
          if (line === "") {  // the end of an event
            if (data.length) on.event(type || "message", data.join("\n"));
            type = ""; data = [];
            continue;
          }
          if (line.startsWith(":")) continue;  // a comment: the keep-alive
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "event") type = value;
          else if (field === "data") data.push(value);
          else if (field === "retry" && /^\d+$/.test(value)) retry = Number(value);
        }
      }
    } catch { /* cut off: opened again below */ }
    await pause();
  }
}

// Times come from the API in UTC (ISO 8601 or epoch seconds); the page shows them in the
// browser's own time zone and locale, with one formatter made at its first use (a page's first
// Intl formatter costs 15-30 ms, loading ICU's data: not while the page is parsed).
let localTime = null;
function localMs(ms) {
  try {
    localTime ??= new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
    return localTime.format(ms);
  } catch (e) { return ""; }  // out of the Date range
}
function local(iso) {
  const t = Date.parse(iso || "");
  return Number.isFinite(t) ? localMs(t) : (iso || "");
}

function age(iso) {
  const t = Date.parse(iso || "");
  if (!t) return "";
  const s = Math.max(0, (Date.now() - t) / 1000);
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= size) return `${Math.floor(s / size)}${unit} ago`;
  return `${Math.floor(s)}s ago`;
}


// Every figure as en-US writes it (1,234,567.125: grouped in threes, up to three decimals),
// written out: Intl.NumberFormat would cost the Usage page's first paint ICU's 15-30 ms.
function num(n) {
  if (typeof n !== "number" || !Number.isFinite(n) || Math.abs(n) >= 1e21) return String(n);
  const [whole, frac] = Math.abs(n).toFixed(3).replace(/\.?0+$/, "").split(".");
  let grouped = whole.slice(0, (whole.length - 1) % 3 + 1);
  for (let i = grouped.length; i < whole.length; i += 3) grouped += `,${whole.slice(i, i + 3)}`;
  return `${n < 0 && (whole !== "0" || frac) ? "-" : ""}${grouped}${frac ? `.${frac}` : ""}`;
}

// Tokens and cost, as the accountant last wrote them (null: not accounted yet).
function compact(n) {
  for (const [unit, size] of [["B", 1e9], ["M", 1e6], ["k", 1e3]]) {
    if (n >= size * 0.9995) { const x = n / size; return `${x < 9.95 ? x.toFixed(1) : Math.round(x)}${unit}`; }
  }
  return String(n);
}
function bytes(n) {
  for (const [unit, size] of [["GB", 1e9], ["MB", 1e6], ["kB", 1e3]]) if (n >= size) return `${(n / size).toFixed(n >= size * 10 ? 0 : 1)} ${unit}`;
  return `${n || 0} B`;
}
function usd(c) {
  if (!c) return "$0.00";
  if (c < 0.005) return "<$0.01";
  return c >= 1000 ? `$${num(Math.round(c))}` : `$${c.toFixed(2)}`;
}
// A cost followed by "+", as in every report: plus the usage of models with no price
// (`unpriced_models`), which is not in it; prices.json gives them one.
function costFigure(cost, unpriced) { return `${usd(cost)}${unpriced && unpriced.length ? "+" : ""}`; }
function usageFigure(tokens, cost, unpriced) {
  return tokens ? `${compact(tokens.total)} tok · ${costFigure(cost, unpriced)}` : "";
}
function usageBreakdown(tokens, cost, unpriced) {
  if (!tokens) return "tokens: not accounted yet";
  const n = num;
  let text = `input ${n(tokens.input)} · output ${n(tokens.output)} · cache write ${n(tokens.cache_write)} · ` +
    `cache read ${n(tokens.cache_read)} · total ${n(tokens.total)} tokens · cost ${costFigure(cost, unpriced)}`;
  if (unpriced && unpriced.length) text += ` (not counting ${unpriced.join(", ")}: no price known; prices.json gives one)`;
  return text;
}
function sumUsage(list) {
  const known = list.filter(u => u && u.tokens);
  if (!known.length) return null;
  const tokens = { input: 0, output: 0, cache_write: 0, cache_read: 0, total: 0 };
  const unpriced = [];
  let cost = 0, sessions = 0;
  for (const u of known) {
    for (const k of ["input", "output", "cache_write", "cache_read", "total"]) tokens[k] += u.tokens[k];
    for (const m of u.unpriced_models || []) if (!unpriced.includes(m)) unpriced.push(m);
    cost += u.cost_usd || 0;
    sessions += u.sessions || 0;
  }
  return { sessions, tokens, cost_usd: cost, unpriced_models: unpriced };
}
function railUsage(u) {
  if (!u || !u.tokens) return null;
  return el("span", { class: "rail-usage", title: `${u.sessions} session${u.sessions === 1 ? "" : "s"} accounted: ${usageBreakdown(u.tokens, u.cost_usd, u.unpriced_models)}`,
                      text: usageFigure(u.tokens, u.cost_usd, u.unpriced_models) });
}

function renderRail() {
  const ul = $("#projects");
  const counts = new Map((list.projects || []).map(p => [p.path, p]));
  const all = el("button", { type: "button", "data-project": "", class: state.project ? "" : "on", text: "All projects", onclick: () => choose("") });
  // The figures sit under each button, not in it: a button's name stays the project's name.
  ul.replaceChildren(el("li", {}, all, railUsage(sumUsage(state.projects.map(p => p.usage)))));
  // The box over the rail narrows it as you type: every word in the project's name or path
  // (the chosen project stays, so the rail always shows where the list is).
  const words = ($("#rail-filter").value || "").toLowerCase().split(/\s+/).filter(Boolean);
  const shown = p => p.path === state.project || words.every(w => `${p.name}\n${p.path}`.toLowerCase().includes(w));
  for (const p of state.projects) {
    if (!shown(p)) continue;
    const button = el("button", { type: "button", "data-project": p.path, title: p.path, class: state.project === p.path ? "on" : "", text: p.name, onclick: () => choose(p.path) });
    const c = counts.get(p.path);
    if (p.live) button.append(el("span", { class: "live-count", title: `${p.live} live`, text: ` ● ${p.live}` }));
    const li = el("li", {}, button,
      c && c.waiting ? el("span", { class: "rail-waiting", title: `sessions of ${p.name} waiting for you`, text: `${c.waiting} waiting` }) : null,
      c ? el("span", { class: "rail-count", title: `sessions of ${p.name} in this view`, text: plural(c.count, "session") }) : null,
      railUsage(p.usage));
    if (c && c.more && state.project === p.path) {
      li.append(el("button", { type: "button", class: "older", title: `list up to ${c.depth + 200} of this project's sessions`,
                               text: `older sessions (${c.listed} listed)`, onclick: () => { list.depth = c.depth + 200; load(); } }));
    }
    ul.append(li);
  }
}

// The tag row: the tags of the sessions in view (of the project chosen), the most used first;
// one chosen narrows the list (and the search in conversations) to its sessions.
function renderTags() {
  const box = $("#tags");
  const tags = list.tags || [];
  if (state.tag && !tags.some(([t]) => t === state.tag)) tags.unshift([state.tag, 0]);
  box.hidden = !tags.length;
  box.replaceChildren(el("h2", { text: "Tags" }), ...tags.map(([t, n]) => el("button", {
    type: "button", "data-tag": t, class: state.tag === t ? "on" : "", title: `${plural(n, "session")} tagged ${t}`,
    text: `#${t}`, onclick: () => chooseTag(state.tag === t ? "" : t) })));
}

function chooseTag(tag) { state.tag = tag; state.open.clear(); renderTags(); load(); if (state.mode === "text") runSearch(); }

function choose(project) { state.project = project; list.depth = 0; state.open.clear(); renderRail(); load(); if (state.mode === "text") runSearch(); }

// ---------------------------------------------------------------- the listing
// One request per page to /api/rows (filtered, searched and sorted by the Hub, over every
// project at once). Pages are appended as the list scrolls, so it reads as one list. Only the
// rows in and near the window are in the document (a windowed list): the others are data with
// a measured (or estimated) height, stood for by the list's padding, so a frame costs the rows
// it shows however long the list is. Live updates come by row from the event stream and are
// applied in place; an open row keeps its node (and what is typed in it) while out of view.

const PAGE_ROWS = 100;
const OVERSCAN_PX = 700;  // drawn above and below the window, so a scroll shows rows already laid out
const list = { gen: 0, next: 0, total: 0, everything: 0, counts: {}, projects: [], loadingMore: false, depth: 0, cache: new Map(),
               rows: [],            // every row loaded, in order
               ids: new Map(),      // id -> its index in rows
               nodes: new Map(),    // id -> its <li>, for the rows drawn
               kept: new Map(),     // id -> <li> of an open row, kept while it is out of the window
               heights: [],         // measured height per index (undefined: not drawn yet)
               tops: null,          // prefix sums of the heights (null: to be summed again)
               guess: 46, measured: 0, measuredSum: 0,
               first: 0, last: 0,   // the drawn rows: [first, last)
               focused: null, key: null,
               pool: [], drawnAt: 0, settle: 0,
               expanded: new Set() };  // roots whose forks are shown under them     // the id of the row last focused, to give it the focus back when it is drawn again

function queryParams(cursor, limit = PAGE_ROWS) {
  const p = new URLSearchParams({ filter: state.filter, cursor: String(cursor), limit: String(limit) });
  if (state.q) p.set("q", state.q);
  if (state.tag) p.set("tag", state.tag);
  if (state.project) p.set("project", state.project);
  if (state.sort) p.set("sort", state.sort);
  if (state.order !== "desc") p.set("order", state.order);
  if (state.project && list.depth) p.set("depth", String(list.depth));
  return p;
}

function newRow(row) {
  const li = $("#row-template").content.firstElementChild.cloneNode(true);
  fillRow(li, row);
  return li;
}

function showCount() {
  const n = list.total, m = list.everything;
  $("#progress").textContent = n === m ? plural(n, "session") : `${num(n)} of ${plural(m, "session")}`;
  $("#empty").hidden = n > 0;
  for (const b of document.querySelectorAll("#filters button")) {
    if (b.dataset.filter === "expiring") continue;  // it has its own badge
    const c = list.counts[b.dataset.filter];
    let badge = $(".filter-n", b);  // beside the name, not in it: a button's name stays what it does
    if (!badge) { badge = el("span", { class: "filter-n", "aria-hidden": "true" }); b.append(badge); }
    badge.textContent = c == null ? "" : ` ${num(c)}`;
  }
  const exp = list.counts.expiring || 0, badge = $("#expiring-count");
  badge.textContent = exp ? String(exp) : ""; badge.hidden = !exp;
  badge.closest("button").title = `${exp ? plural(exp, "session") : "No session"} ${exp === 1 ? "is" : "are"} deleted by Claude Code's cleanup within a week, unless kept`;
  showExpiring();
  for (const h of document.querySelectorAll("#columns button[data-sort]")) {
    const on = h.dataset.sort === list.sort;
    h.classList.toggle("on", on);
    h.setAttribute("aria-sort", on ? (list.order === "asc" ? "ascending" : "descending") : "none");
  }
}

// The banner: sessions of the shown projects that Claude Code's cleanup deletes within the week
// and c3async does not keep (beyond the rows listed too), and a button that keeps them all.
function showExpiring() {
  const e = list.expiring, banner = $("#expiring-banner");
  if (!e || !e.unkept) { banner.hidden = true; return; }
  const when = e.soonest === 0 ? "at its next start" : `in ${plural(e.soonest, "day")}`;
  const waived = e.waived ? `, ${num(e.waived)} unkept by a mark` : "";
  const which = e.unkept === e.sessions ? (e.sessions === 1 ? "it" : "them")
    : e.unkept === 1 ? "the other one" : `the ${num(e.unkept)} others`;  // worded as the CLI's warning
  $("#expiring-text").textContent = `${plural(e.sessions, "session")} ${e.sessions === 1 ? "expires" : "expire"} within ${e.days} days ` +
    `(${num(e.kept)} kept${waived}): Claude Code deletes ${which}, the first ${when}.`;
  banner.hidden = false;
}

async function keepAll() {
  const button = $("#keep-all"), said = $("#keep-all-result");
  button.disabled = true; said.className = ""; said.textContent = "keeping…";
  try {
    const r = await api("/api/keep/expiring", { method: "POST", body: { project: state.project || null } });
    // the banner goes once they are kept: the header says what was done
    $("#status").textContent = `kept ${plural(r.kept, "session")} past Claude Code's cleanup`;
    said.textContent = r.failed ? `the archive refused ${num(r.failed)}: ${r.error}` : "";
    if (r.failed) said.className = "error";
  } catch (e) { said.className = "error"; said.textContent = e.message; }
  finally { button.disabled = false; }
  load();
}

function take(data) {
  list.total = data.total; list.counts = data.counts; list.projects = data.projects; list.next = data.next;
  list.tags = data.tags || [];
  renderTags();
  list.expiring = data.expiring || null;
  list.sort = data.sort; list.order = data.order;
  document.title = `${data.waiting ? `(${data.waiting}) ` : ""}Sessions · c3async Hub`;  // how many wait for the user, in the tab
  const scope = state.project ? data.projects.filter(p => p.path === state.project) : data.projects;
  list.everything = scope.reduce((n, p) => n + p.listed, 0);
}

// ------------------------------------------------ the rows loaded, and the window drawn of them

function reindex() {
  list.ids = new Map(list.rows.map((row, i) => [row.id, i]));
  list.tops = null;
}

function addRows(rows) {
  for (const row of rows) {
    if (list.ids.has(row.id)) continue;
    list.ids.set(row.id, list.rows.length);
    list.rows.push(row);
    state.rows.set(row.id, row);
  }
  list.tops = null;
}

function tops() {
  if (!list.tops) {
    const n = list.rows.length, t = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) t[i + 1] = t[i] + (list.heights[i] ?? list.guess);
    list.tops = t;
  }
  return list.tops;
}

// The first index whose row ends below y (the list's own coordinates).
function indexAt(y) {
  const t = tops();
  let lo = 0, hi = list.rows.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (t[mid + 1] <= y) lo = mid + 1; else hi = mid; }
  return lo;
}

// A row's node: its own while drawn or open, else one that left the window (refilled), else new.
function nodeFor(row) {
  let li = list.nodes.get(row.id) || list.kept.get(row.id);
  if (li) return li;
  li = list.pool.pop();
  if (!li) return newRow(row);
  const detail = $(".detail", li);
  if (!detail.hidden) { detail.hidden = true; detail.replaceChildren(); }
  fillRow(li, row);
  return li;
}

// Draw the rows in and near the window: the nodes that left it go (an open row's is kept for
// later), the ones that came are put in order, then the drawn rows are measured and the
// padding that stands for the rest is set from the heights.
function draw() {
  const box = $("#rows");
  // hidden (the Usage page, or the search in conversations, is shown): nothing to measure; the
  // class is checked first, as reading offsetParent would lay out the page
  if (document.documentElement.classList.contains("view-usage") || !box.offsetParent) return;
  const n = list.rows.length;
  const origin = box.getBoundingClientRect().top + scrollY;  // the list's y = 0, on the page
  // a fast scroll (more than a window since the last frame) draws only what is in view, and
  // the margins once it slows: the rows a frame fills are the rows it shows
  const fast = Math.abs(scrollY - list.drawnAt) > innerHeight;
  list.drawnAt = scrollY;
  clearTimeout(list.settle);
  if (fast) list.settle = setTimeout(queueDraw, 150);
  const margin = fast ? 0 : OVERSCAN_PX;
  const from = Math.max(0, scrollY - origin - margin), to = scrollY - origin + innerHeight + margin;
  const first = Math.min(indexAt(from), n), last = Math.max(first, Math.min(n, indexAt(to) + 1));
  const want = [];
  const nodes = new Map();
  for (let i = first; i < last; i++) {
    const row = list.rows[i], li = nodeFor(row);
    li.setAttribute("aria-posinset", String(i + 1));
    li.setAttribute("aria-setsize", String(list.total));
    nodes.set(row.id, li);
    want.push(li);
  }
  for (const [id, li] of list.nodes) {
    if (nodes.has(id)) continue;
    li.remove();
    if (state.open.has(id)) list.kept.set(id, li);
    else if (list.pool.length < 200 && !li.contains(document.activeElement)) list.pool.push(li);
  }
  for (const id of nodes.keys()) list.kept.delete(id);
  let at = box.firstElementChild;
  for (const li of want) {
    if (li === at) at = at.nextElementSibling;
    else box.insertBefore(li, at);
  }
  while (at) { const next = at.nextElementSibling; at.remove(); at = next; }
  list.nodes = nodes; list.first = first; list.last = last;
  // measure what is drawn; a row above the window that turns out taller or shorter moves the
  // page by as much, so the rows in view stay where they were
  const t = tops();
  const viewTop = scrollY - origin;
  let shift = 0, changed = false;
  for (let i = first; i < last; i++) {
    const h = want[i - first].offsetHeight, old = list.heights[i];
    if (h === old) continue;
    if (old === undefined) { list.measured++; list.measuredSum += h; }
    else list.measuredSum += h - old;
    if (t[i + 1] <= viewTop) shift += h - (old ?? list.guess);
    list.heights[i] = h;
    changed = true;
  }
  if (changed) { list.guess = list.measuredSum / list.measured; list.tops = null; }
  const s = tops();
  box.style.paddingTop = `${s[first]}px`;
  box.style.paddingBottom = `${s[n] - s[last]}px`;
  if (shift) window.scrollBy(0, shift);
  if (list.focused && document.activeElement === document.body) {  // the focused row came back into the window
    const li = nodes.get(list.focused);
    if (li) $(".title", li).focus({ preventScroll: true });
  }
  maybeMore();
}

let drawQueued = false;
function queueDraw() {
  if (drawQueued) return;
  drawQueued = true;
  requestAnimationFrame(() => { drawQueued = false; draw(); });
}

async function load() {
  const gen = ++list.gen;
  const key = queryParams(0).toString();
  const cached = list.cache.get(key);  // a view seen before paints at once, then is brought up to date
  if (cached) paint(cached, gen);
  let data;
  try { data = await api(`/api/rows?${key}`); } catch (e) { $("#progress").textContent = e.message; return; }
  if (gen !== list.gen) return;
  list.cache.set(key, data);
  if (list.cache.size > 20) list.cache.delete(list.cache.keys().next().value);
  paint(data, gen);
  // the rail's figures (live counts, tokens per project) after the rows: they cost the Hub more
  loadProjects().then(() => { if (gen === list.gen) renderRail(); });
}

// A new first page (another filter, search, sort or project): the list starts again from it.
// The nodes of rows on it are reused, so an open row stays open.
function paint(data, gen) {
  if (gen !== list.gen) return;
  const key = queryParams(0).toString();
  if (key !== list.key) {  // another view: from its top (a live update of this one keeps the place)
    list.key = key;
    const top = $("#rows").getBoundingClientRect().top + scrollY - $("#columns").getBoundingClientRect().height;
    if (scrollY > top) window.scrollTo(0, Math.max(0, top - $("header").offsetHeight));
  }
  take(data);
  const reuse = new Map([...list.kept, ...list.nodes]);
  list.rows = []; list.ids = new Map(); list.heights = []; state.rows = new Map(); list.expanded.clear();
  addRows(data.rows);
  list.nodes = new Map(); list.kept = new Map();
  for (const row of data.rows) {
    const li = reuse.get(row.id);
    if (!li) continue;
    fillRow(li, row);
    if (li.isConnected) list.nodes.set(row.id, li);
    else if (state.open.has(row.id)) list.kept.set(row.id, li);
  }
  for (const [id, li] of reuse) if (!list.nodes.has(id)) li.remove();
  draw();
  showCount();
  renderRail();
}

async function loadProjects() {
  try { state.projects = (await api("/api/projects")).projects; } catch (e) { /* the rail keeps what it had */ }
}

async function more() {
  if (list.loadingMore || list.next == null) return;
  list.loadingMore = true;
  const gen = list.gen;
  try {
    const data = await api(`/api/rows?${queryParams(list.next)}`);
    if (gen !== list.gen) return;
    take(data);
    addRows(data.rows);
    showCount();
  } catch (e) { $("#progress").textContent = e.message; return; }
  finally { list.loadingMore = false; }
  draw();
}

// More rows when the end of what is loaded comes near the window.
function maybeMore() {
  if (list.next != null && !list.loadingMore && list.last >= list.rows.length - 20) more();
}

// A change from the event stream: the rows it names are updated in place (drawn or not); the
// counts are asked again; new rows at the top of a newest-first list are put there.
async function applyChange(change) {
  if (change.rows === null) { load(); return; }
  notifyWaiting(change.rows);
  for (const row of change.rows) {
    const i = list.ids.get(row.id);
    if (i === undefined) continue;
    if (list.rows[i]._under) row._under = list.rows[i]._under;
    list.rows[i] = row;
    state.rows.set(row.id, row);
    const li = list.nodes.get(row.id) || list.kept.get(row.id);
    if (li) fillRow(li, row);
  }
  const removed = new Set((change.removed || []).filter(id => list.ids.has(id)));
  if (removed.size) {
    const heights = list.heights;
    const keep = list.rows.map((row, i) => [row, heights[i]]).filter(([row]) => !removed.has(row.id));
    list.rows = keep.map(([row]) => row); list.heights = keep.map(([, h]) => h);
    for (const id of removed) { state.rows.delete(id); list.kept.delete(id); state.open.delete(id); }
    reindex();
  }
  const gen = list.gen;
  let data;
  try { data = await api(`/api/rows?${queryParams(0, 50)}`); } catch (e) { draw(); return; }
  if (gen !== list.gen) return;
  const before = list.total;
  take(data);
  if (list.next !== null) list.next = Math.max(list.next, list.rows.length);
  const newest = list.sort === "activity" && list.order === "desc";
  const fresh = data.rows.filter(r => !list.ids.has(r.id));
  if (newest && fresh.length && fresh.length <= data.total - before + fresh.length) {
    // above the window when the page is scrolled: the page moves down by their (estimated)
    // height, so what is in view stays; draw corrects the estimate when they are measured
    const y = scrollY;
    list.rows.unshift(...fresh);
    list.heights.unshift(...fresh.map(() => undefined));
    for (const row of fresh) state.rows.set(row.id, row);
    reindex();
    if (y > 0) window.scrollBy(0, fresh.length * list.guess);
  }
  draw();
  showCount();
  renderRail();
}

// Opt-in desktop notifications: one when a session starts waiting for the user (a row of the
// change stream whose waiting began after this page opened), once per wait.
const NOTIFY_KEY = "c3async-notify-waiting";
const notified = new Set();
const openedAt = Date.now();
function notifyOn() { return localStorage.getItem(NOTIFY_KEY) === "1" && "Notification" in window && Notification.permission === "granted"; }
function notifyWaiting(rows) {
  if (!notifyOn()) return;
  for (const row of rows) {
    if (row.state !== "waiting" || !row.state_since) continue;
    const key = `${row.id} ${row.state_since}`;
    if (notified.has(key) || Date.parse(row.state_since) < openedAt - 2000) continue;
    notified.add(key);
    const n = new Notification("A session waits for you", { body: `${row.title} (${row.project.split("/").pop()})`, tag: row.id });
    n.onclick = () => { window.focus(); jump(row.id); };
  }
}
function showNotify() {
  const b = $("#notify"), on = notifyOn();
  b.setAttribute("aria-pressed", String(on));
  b.classList.toggle("on", on);
  b.hidden = !("Notification" in window);
}
async function toggleNotify() {
  if (notifyOn()) { localStorage.removeItem(NOTIFY_KEY); showNotify(); return; }
  const answer = Notification.permission === "granted" ? "granted" : await Notification.requestPermission();
  if (answer === "granted") localStorage.setItem(NOTIFY_KEY, "1");
  else flash(null, "notifications are blocked for this page (the browser's site settings allow them)");
  showNotify();
}

// A root's forks, shown under it (fetched when asked) or hidden again.
async function toggleForks(id) {
  if (list.expanded.has(id)) {
    list.expanded.delete(id);
    const keep = list.rows.map((r, i) => [r, list.heights[i]]).filter(([r]) => r._under !== id);
    for (const r of list.rows) if (r._under === id) state.rows.delete(r.id);
    list.rows = keep.map(([r]) => r); list.heights = keep.map(([, h]) => h);
  } else {
    const gen = list.gen;
    let data;
    try { data = await api(`/api/rows?forks_of=${encodeURIComponent(id)}&limit=200`); } catch (e) { flash(null, e.message); return; }
    if (gen !== list.gen || !list.ids.has(id)) return;
    list.expanded.add(id);
    const at = list.ids.get(id) + 1;
    const forks = data.rows.filter(r => !list.ids.has(r.id));
    for (const r of forks) { r._under = id; state.rows.set(r.id, r); }
    list.rows.splice(at, 0, ...forks);
    list.heights.splice(at, 0, ...forks.map(() => undefined));
  }
  reindex();
  const li = list.nodes.get(id);
  if (li) fillRow(li, list.rows[list.ids.get(id)]);
  draw();
}

function sortBy(key) {
  if (state.sort === key || (!state.sort && list.sort === key)) state.order = state.order === "desc" ? "asc" : "desc";
  else { state.sort = key; state.order = key === "title" ? "asc" : "desc"; }
  load();
}

// Bring row i into the window (drawn, in view below the sticky header) and return its node.
function reveal(i, block = "nearest") {
  const box = $("#rows"), t = tops();
  const origin = box.getBoundingClientRect().top + scrollY;
  const head = $("#columns").getBoundingClientRect().bottom;
  const top = origin + t[i], bottom = origin + t[i + 1];
  if (block === "center") window.scrollTo(0, top - innerHeight / 2);
  else if (top < scrollY + head) window.scrollTo(0, top - head);
  else if (bottom > scrollY + innerHeight) window.scrollTo(0, bottom - innerHeight);
  draw();
  return list.nodes.get(list.rows[i].id);
}

// Keyboard: j/k or the arrows move between rows, Enter opens one, / searches, c copies its resume command.
function rowOf(node) { return node && node.closest ? node.closest("#rows li.row") : null; }
function focusRow(i) {
  if (i < 0 || i >= list.rows.length) return;
  const li = reveal(i);
  if (li) { list.focused = list.rows[i].id; $(".title", li).focus({ preventScroll: true }); }
}
function onKey(e) {
  if (document.documentElement.classList.contains("view-usage")) return;  // the list's keys, not the Usage page's
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
  if (e.key === "/" && !typing) { e.preventDefault(); $("#search").focus(); $("#search").select(); return; }
  if (e.key === "Escape" && typing) { document.activeElement.blur(); return; }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const li = rowOf(document.activeElement);
  const id = li ? li.dataset.id : list.focused;
  const here = id != null && list.ids.has(id) ? list.ids.get(id) : -1;
  if (e.key === "j" || e.key === "ArrowDown") {
    e.preventDefault();
    focusRow(here + 1);
    if (here + 2 >= list.rows.length) more();
  } else if (e.key === "k" || e.key === "ArrowUp") {
    e.preventDefault();
    if (here > 0) focusRow(here - 1);
  } else if (e.key === "c" && here >= 0) {
    copyText(list.rows[here].resume);
  }
}
async function copyText(text) {
  try { await navigator.clipboard.writeText(text); flash(null, "resume command copied"); }
  catch { flash(null, "select the command to copy it"); }
}

// Keeping sessions past Claude Code's cleanup (it deletes transcripts older than cleanupPeriodDays).
const KEEP_TIP = "Keep past Claude Code's cleanup: the transcript is preserved in c3async's archive";
const ARCHIVED_TIP = "Claude Code deleted this transcript; c3async kept it. Resume puts it back.";
const EXPIRY = /^expires in \d+d$/;

function keptBy(row) {
  return row.kept_by === "mark" ? "a keep mark" : row.kept_by ? `the keep ${row.kept_by}` : "c3async";
}

function expiryTip(row) {
  const n = row.expires_in_days;
  const when = n == null ? "soon" : n === 0 ? "at its next start" : `in ${n} day${n === 1 ? "" : "s"}`;
  return `Claude Code's cleanup deletes this transcript ${when} (cleanupPeriodDays). Keep preserves it in c3async's archive.`;
}

function rowChips(row) {
  const out = [];
  if (row.archived) out.push(el("span", { class: "chip archived", title: ARCHIVED_TIP, text: "archived" }));
  if (row.kept) out.push(el("span", { class: "chip kept", title: `Kept past Claude Code's cleanup by ${keptBy(row)} (kept_by: ${row.kept_by || "?"})`, text: "kept" }));
  if (row.stale) out.push(el("span", { class: "chip stale", text: `stale: ${row.stale.reason}` }));
  for (const t of row.tags || []) out.push(el("span", { class: "chip tag", title: `tagged ${t}`, text: `#${t}` }));
  if (row.forked_from) out.push(el("span", { class: "chip fork", title: `forked from ${row.forked_from}`, text: `fork of ${row.forked_from.slice(0, 8)}` }));
  // a stale row shows its reason, not its hints; its expiry still shows (it is what happens next)
  const why = state.filter === "likely" && row.why && row.why.length ? row.why : row.hints;
  for (const h of why) {
    if (EXPIRY.test(h)) out.push(el("span", { class: "chip expiring", title: expiryTip(row), text: h }));
    else if (!row.stale) out.push(el("span", { class: "chip", text: h }));
  }
  return out;
}

// A row node's parts, found once: a scroll fills fifty rows a frame.
const PARTS = ["dot", "title", "live-pill", "state-pill", "branch", "project", "chips", "counts", "fork-toggle", "tokens", "cost", "size", "age", "resume"];
function parts(li) {
  if (!li._parts) li._parts = Object.fromEntries(PARTS.map(name => [name, $(`.${name}`, li)]));
  return li._parts;
}

function fillRow(li, row) {
  const p = parts(li);
  li.dataset.id = row.id;
  li.dataset.project = row.project;
  li.classList.toggle("live", !!row.live);
  li.classList.toggle("stale", !!row.stale);
  p.dot.title = row.live ? "live" : "not live";
  const title = p.title;
  title.textContent = row.title;
  title.title = row.id;
  title.onclick = () => toggle(li, row);
  const pill = p["live-pill"];
  pill.hidden = !row.live;
  pill.textContent = row.mcp_count > 1 ? `LIVE MCP×${row.mcp_count}` : "LIVE";
  // busy or waiting for the user, from Claude Code's own registry (idle, or not known: nothing)
  const st = p["state-pill"], shown = row.live && (row.state === "waiting" || row.state === "busy");
  st.hidden = !shown;
  st.className = `pill state-pill ${shown ? row.state : ""}`;
  st.textContent = !shown ? "" : row.state === "waiting" ? `waiting ${age(row.state_since).replace(" ago", "")}` : "busy";
  st.title = !shown ? "" : `${row.state} since ${row.state_since || "?"}${row.state === "waiting" ? ": it waits for your answer" : ""}`;
  p.branch.textContent = row.branch || "";
  p.branch.hidden = !row.branch;
  p.branch.title = row.branch || "";
  p.project.textContent = state.project ? "" : row.project.split("/").pop();
  p.chips.replaceChildren(...rowChips(row));
  const l = row.links || {};
  const nt = Array.isArray(l.tasks) ? l.tasks.length : l.tasks || 0, nd = Array.isArray(l.decisions) ? l.decisions.length : l.decisions || 0;
  const counts = [];
  if (nt) counts.push(`${nt} task${nt > 1 ? "s" : ""}`);
  if (nd) counts.push(`${nd} decision${nd > 1 ? "s" : ""}`);
  if (l.snapshot) counts.push("snapshot");
  p.counts.textContent = counts.join(" · ");
  // forks: a root lists its forks under "+N forks"; a fork shown says so
  const n = row.fork_count || 0, forkButton = p["fork-toggle"];
  forkButton.hidden = !(n && !row.root && !row._under);
  const open = list.expanded.has(row.id);
  forkButton.textContent = `${open ? "−" : "+"}${n} fork${n === 1 ? "" : "s"}`;
  forkButton.setAttribute("aria-expanded", String(open));
  forkButton.title = open ? "hide its forks" : "show the sessions forked from this one (/branch, --fork-session)";
  forkButton.onclick = () => toggleForks(row.id);
  li.classList.toggle("fork-child", !!row._under);
  const t = row.tokens, breakdown = usageBreakdown(t, row.cost_usd, row.unpriced_models);
  p.tokens.textContent = t ? compact(t.total) : "";
  p.cost.textContent = t ? costFigure(row.cost_usd, row.unpriced_models) : "";
  p.tokens.title = p.cost.title = breakdown;
  p.size.textContent = bytes(row.size);
  p.size.title = `${num(row.size || 0)} bytes of transcript`;
  // The age says what the list is sorted by: its creation when sorted by Created, else its last activity.
  const byCreated = list.sort === "created" && row.created_at;
  p.age.textContent = age(byCreated ? row.created_at : row.last_activity || row.mtime);
  p.age.title = `last activity ${local(row.last_activity || row.mtime)}${row.created_at ? `; created ${local(row.created_at)}` : ""}`;
  p.resume.onclick = () => showResume(li, row);
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
  out.push(...section("Where", el("div", { class: "where", text: [`project ${r.project}`, r.branch ? `branch ${r.branch}` : "",
    `cwd ${r.cwd}`, `created ${r.created_at ? local(r.created_at) : "?"}`, `last activity ${local(r.last_activity || r.mtime)}`, bytes(r.size),
    usageFigure(r.tokens, r.cost_usd, r.unpriced_models)].filter(Boolean).join(" · ") })));
  out.push(...section("First prompt", el("pre", { text: r.first_prompt || "—" })));
  out.push(...section("Last prompt", el("pre", { text: r.last_prompt || "—" })));
  if (r.note) out.push(...section("Note", el("pre", { text: `${r.note.summary || ""}${r.note.next_steps ? "\nNext: " + r.note.next_steps : ""}` })));
  else if (d.last_snapshot) out.push(...section("Last snapshot", el("pre", { text: d.last_snapshot.summary })));
  if (r.links.tasks.length) out.push(...section("Tasks", ...r.links.tasks.map(t => el("div", { text: `${t.id.slice(0, 8)} · ${t.status} · ${t.title}` }))));
  if (r.links.decisions.length) out.push(...section("Decisions", ...r.links.decisions.slice(-5).map(x => el("div", { text: x.text }))));
  const links = d.chain;
  if (links.predecessors.length || links.successors.length) {
    const chain = el("div", { class: "chain" });
    for (const [label, ids] of [["← ", links.predecessors], ["→ ", links.successors]]) {
      for (const id of ids) chain.append(el("a", { href: "#", text: label + id.slice(0, 8), onclick: (e) => { e.preventDefault(); jump(id); } }));
    }
    out.push(...section("Chain", chain));
  }
  if (d.changed && d.changed.length) out.push(...section(d.changed_whole ? "Files changed" : "Files changed (lately)", changedNode(d.changed, r)));
  if (d.turns.length) out.push(...section("Last turns", ...d.turns.map(t => el("div", { class: "turn" }, el("b", { text: t.role }), document.createTextNode(t.text)))));
  out.push(...conversationSection(r));
  out.push(...section("Tokens and cost", el("div", { class: "usage-detail", text: usageBreakdown(r.tokens, r.cost_usd, r.unpriced_models) +
    (r.tokens && r.tokens.as_of ? ` (counted ${age(new Date(r.tokens.as_of * 1000).toISOString())})` : "") })));
  out.push(...section("Resume", el("code", { class: "cmd", text: r.resume }),
    ...(r.archived ? [el("p", { class: "counts archived-note", text: "Claude Code deleted this transcript; c3async kept it. This command puts it back, then resumes it." })] : []),
    openHere(d, r)));
  out.push(actions(r, li));
  return out;
}

// Beside the resume command: the session in VS Code (Claude Code's extension opens a link to it)
// and, where the Hub can start one, a terminal in its folder. The id goes into the link only as
// a UUID, so nothing else can ride on it.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
function openHere(d, r) {
  const box = el("div", { class: "open-here" });
  if (UUID.test(r.id)) box.append(el("a", { class: "vscode", href: `vscode://anthropic.claude-code/open?session=${r.id}`, text: "Open in VS Code" }));
  if (d.terminal) {
    const msg = el("span", { class: "counts" });
    const open = async () => {
      msg.className = "counts"; msg.textContent = "opening…";
      try {
        await api(`/api/sessions/${encodeURIComponent(r.id)}/terminal`, { method: "POST", body: { project: r.project } });
        msg.textContent = "terminal opened";
      } catch (e) { msg.className = "error"; msg.textContent = e.message; }
    };
    box.append(el("button", { type: "button", class: "terminal", title: `a terminal in ${r.cwd}`, text: "Open a terminal here", onclick: open }), msg);
  }
  return box;
}

// Each file a session changed, a link to the sessions that changed it (/api/files), listed under it.
function changedNode(paths, r) {
  const box = el("div", { class: "changed" });
  for (const path of paths) {
    const under = el("ul", { class: "changed-by", hidden: true });
    const link = el("a", { href: `#files=${encodeURIComponent(path)}`, title: "the sessions that changed this file", text: path,
                           onclick: (e) => { e.preventDefault(); showChangedBy(path, r.project, under); } });
    box.append(link, under);
  }
  return box;
}

async function showChangedBy(path, project, under) {
  if (!under.hidden) { under.hidden = true; return; }
  under.hidden = false;
  under.replaceChildren(el("li", { text: "loading…" }));
  try {
    const found = await api(`/api/files?${new URLSearchParams({ path, project })}`);
    under.replaceChildren(...found.sessions.map(t => el("li", {},
      el("a", { href: "#", title: t.id, text: t.title || `session ${t.id.slice(0, 8)}`, onclick: (e) => { e.preventDefault(); jump(t.id); } }),
      document.createTextNode(` · ${plural(t.count, "change")} (${t.tools.join(", ")}) · ${when(t.last_ts)}${t.by_subagent ? " · by a sub-agent" : ""}${t.forked_from ? ` · fork of ${t.forked_from.slice(0, 8)}` : ""}`))));
    if (!found.sessions.length) under.replaceChildren(el("li", { text: "no session changed it (the index may still be building)" }));
  } catch (e) {
    under.replaceChildren(el("li", { class: "error", text: e.message }));
  }
}

function jump(id) {
  const i = list.ids.get(id);
  if (i === undefined) { flash(null, `session ${id.slice(0, 8)} is not among the rows shown (search for it)`); return; }
  const li = reveal(i, "center"), row = list.rows[i];
  if (li && $(".detail", li).hidden) toggle(li, row);
}

function field(label, input) { return el("label", { class: "field" }, el("span", { text: label }), input); }
function actions(r, li) {
  const reason = el("input", { placeholder: "superseded, finished, abandoned…" });
  const successor = el("input", { placeholder: "session id (optional)" });
  const summary = el("input", { placeholder: "what was done" });
  const next = el("input", { placeholder: "what comes next" });
  const msg = el("span", { class: "counts" });
  const send = async (body) => {
    msg.className = "counts"; msg.textContent = "saving…";
    try {
      await api(`/api/sessions/${encodeURIComponent(r.id)}/marks`, { method: "POST", body: { project: r.project, ...body } });
      const row = state.rows.get(r.id);
      if (row) await openDetail(li, row);  // show the new state (and Unstale after a stale); the row follows by the event stream
      flash(li, "saved");
    } catch (e) { msg.className = "error"; msg.textContent = e.message; }
  };
  const box = el("div", { class: "actions" });
  const keepGroup = el("fieldset", { class: "group" }, el("legend", { text: "Keep" }));
  const staleGroup = el("fieldset", { class: "group" }, el("legend", { text: "Stale" }));
  const noteGroup = el("fieldset", { class: "group" }, el("legend", { text: "Note" }));
  if (r.kept) {
    const tip = r.archived ? "Claude Code already deleted this transcript: Unkeep deletes c3async's copy, the only one left"
      : `Let Claude Code's cleanup delete it again: removes its archive entry${r.kept_by && r.kept_by !== "mark" ? ` (overrides the keep ${r.kept_by})` : ""}`;
    const unkeep = () => {
      if (r.archived && !window.confirm(`${tip}. Delete it for good?`)) return;
      send(r.archived ? { op: "unkeep", release: true } : { op: "unkeep" });
    };
    keepGroup.append(el("button", { type: "button", class: "unkeep", title: tip, text: "Unkeep", onclick: unkeep }),
                     el("span", { class: "counts kept-by", text: `kept by ${keptBy(r)}` }));
  } else {
    keepGroup.append(el("button", { type: "button", class: "keep", title: KEEP_TIP, text: "Keep", onclick: () => send({ op: "keep" }) }));
  }
  if (r.stale) staleGroup.append(el("button", { type: "button", class: "unstale", text: "Unstale", onclick: () => send({ op: "unstale" }) }));
  else staleGroup.append(field("Stale reason", reason), field("Successor", successor),
    el("button", { type: "button", class: "mark-stale", text: "Mark stale", onclick: () => send({ op: "stale", reason: reason.value, successor: successor.value || null }) }));
  noteGroup.append(field("Note summary", summary), field("Next steps", next),
    el("button", { type: "button", class: "save-note", text: "Save note", onclick: () => send({ op: "note", summary: summary.value, next_steps: next.value }) }));
  box.append(staleGroup, noteGroup, keepGroup, msg);
  return box;
}

// ---------------------------------------------------------------- the conversation reader
// A session's whole transcript, read a page at a time from /api/sessions/ID/conversation (pages
// are addressed by byte offsets: after=, before=, at=). Prompts and replies are plain text; a
// tool call is one line (a <details>) with its input and output inside. Transcript text goes in
// through textContent only. Entry point for other features (search): openConversation().

const CONV_LIMIT = 50;
const CONV_END = Number.MAX_SAFE_INTEGER;  // before= this: the last page (the server clamps)

function readerButtons(box, project, sid) {
  return [el("button", { type: "button", class: "conv-open", text: "Read from the start", onclick: () => openReader(box, project, sid, {}) }),
          el("button", { type: "button", class: "conv-open-end", text: "Read from the end", onclick: () => openReader(box, project, sid, { before: CONV_END }) })];
}

function conversationSection(r) {
  const box = el("div", { class: "conversation" });
  box.append(...readerButtons(box, r.project, r.id));
  const saved = el("span", { class: "counts conv-export-status" });
  const exports = el("div", { class: "conv-export" }, el("span", { class: "counts", text: "Export: " }),
    el("button", { type: "button", class: "conv-export-md", text: "Markdown", title: "the whole conversation as a Markdown file",
                   onclick: () => exportSession(r, "md", saved) }),
    el("button", { type: "button", class: "conv-export-html", text: "HTML page", title: "the whole conversation as one HTML page (no script)",
                   onclick: () => exportSession(r, "html", saved) }), saved);
  return section("Conversation", box, exports);
}

// A download of the session's export: fetched with the token's header as every API call (a
// link cannot send it), then saved from the answer's bytes under the name the Hub gave.
async function exportSession(r, format, status) {
  status.className = "counts conv-export-status";
  status.textContent = "exporting…";
  try {
    const q = new URLSearchParams({ project: r.project, format });
    const [res, sent] = await request(`/api/sessions/${encodeURIComponent(r.id)}/export?${q}`, { headers: { "Accept": "*/*" } });
    if (res.status === 401) { signOut(sent); throw new Error(SIGN_IN); }
    if (!res.ok) { const data = await res.json().catch(() => ({})); throw new Error(data.error || `HTTP ${res.status}`); }
    const name = (/filename="([0-9a-f-]+\.(?:md|html))"/.exec(res.headers.get("Content-Disposition") || "") || [])[1] || `${r.id}.${format}`;
    const url = URL.createObjectURL(await res.blob());
    const a = el("a", { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    status.textContent = `saved ${name}`;
  } catch (e) {
    status.className = "error conv-export-status";
    status.textContent = e.message;
  }
}

function convUrl(reader, params) {
  const q = new URLSearchParams({ project: reader.project, limit: String(CONV_LIMIT) });
  for (const [k, v] of Object.entries(params)) q.set(k, String(v));
  if (reader.agent) q.set("agent", reader.agent);
  return `/api/sessions/${encodeURIComponent(reader.sid)}/conversation?${q}`;
}

function toolLabel(it) {
  if (!it.name) return "tool result";
  return it.summary ? `${it.name}: ${it.summary}` : it.name;
}

function fillTool(reader, node, it) {
  $("summary", node).textContent = toolLabel(it);
  node.classList.toggle("conv-error", !!it.is_error);
  if (it.result_offset != null) node.dataset.result = String(it.result_offset);
  const body = [];
  if (it.input != null) body.push(el("h4", { text: "Input" + (it.input_truncated ? " (cut)" : "") }), el("pre", { class: "conv-input", text: it.input }));
  if (it.output != null) body.push(el("h4", { text: (it.is_error ? "Error" : "Output") + (it.output_truncated ? " (cut at 20,000 characters)" : "") }),
                                   el("pre", { class: "conv-output", text: it.output }));
  else body.push(el("p", { class: "counts", text: "(no result on the pages loaded)" }));
  if (it.agent) {
    const sub = el("div", { class: "conversation conv-sub" });
    sub.append(el("button", { type: "button", text: `Read the sub-agent's transcript (${it.agent})`, onclick: () => openReader(sub, reader.project, reader.sid, { agent: it.agent }) }));
    body.push(sub);
  }
  const old = $(".conv-body", node);
  const box = el("div", { class: "conv-body" }, ...body);
  if (old) old.replaceWith(box); else node.append(box);
}

// One item's node; null when it joined a tool call already shown (a result from another page).
function convNode(reader, it) {
  const attrs = (kind) => ({ class: `conv-item conv-${kind}${it.sidechain ? " conv-sidechain" : ""}`,
                             "data-offset": String(it.offset), title: local(it.ts) });
  if (it.kind === "user" || it.kind === "assistant") {
    return el("div", attrs(it.kind), el("b", { text: it.sidechain ? `sub-agent ${it.kind}` : it.kind }),
              el("div", { class: "conv-text", text: it.text + (it.truncated ? "\n… (cut)" : "") }));
  }
  if (it.kind === "tool") {
    const known = it.tool_id ? reader.tools.get(it.tool_id) : null;
    if (known && !it.name && known.item.name && known.item.output == null) {
      // the result of a call shown on a page loaded before
      known.item = { ...known.item, output: it.output, output_truncated: it.output_truncated, is_error: it.is_error,
                     result_offset: it.result_offset, agent: it.agent };
      fillTool(reader, known.node, known.item);
      return null;
    }
    if (known && it.name && !known.item.name && it.output == null) {
      // the call of a result shown alone on a later page: they become one line, here
      it = { ...it, output: known.item.output, output_truncated: known.item.output_truncated, is_error: known.item.is_error,
             result_offset: known.item.result_offset, agent: known.item.agent };
      known.node.remove();
    }
    const node = el("details", attrs("tool"), el("summary", { text: "" }));
    fillTool(reader, node, it);
    if (it.tool_id) reader.tools.set(it.tool_id, { node, item: it });
    return node;
  }
  if (it.kind === "summary") {
    const node = el("details", attrs("summary"), el("summary", { text: "Conversation compacted: summary of what came before" }));
    node.classList.add("conv-mark");
    node.append(el("pre", { class: "conv-text", text: it.text + (it.truncated ? "\n… (cut)" : "") }));
    return node;
  }
  if (it.kind === "clear") {
    const node = el("div", attrs("clear"), el("span", { text: `${it.text}: the context was cleared here` }));
    node.classList.add("conv-mark");
    return node;
  }
  return el("div", attrs(it.kind), el("span", { text: it.text || it.kind }));  // command, long
}

// The words of a search, for marking them in the reader: operators, quotes and * left out.
function queryWords(q) {
  return (q.match(/"[^"]*"|\S+/g) || []).map(w => w.replace(/^[-"]+|["*]+$/g, "")).filter(w => w && !/^(OR|AND|NOT)$/.test(w));
}

// Each occurrence of one of `words` in the text under `node` in a <mark> (text nodes only).
function highlight(node, words) {
  const wanted = words.map(w => w.toLowerCase()).filter(Boolean);
  if (!wanted.length) return;
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode);
  for (const t of texts) {
    const text = t.nodeValue, low = text.toLowerCase();
    const spans = [];
    for (const w of wanted) for (let i = low.indexOf(w); i >= 0; i = low.indexOf(w, i + w.length)) spans.push([i, i + w.length]);
    if (!spans.length) continue;
    spans.sort((a, b) => a[0] - b[0]);
    const frag = document.createDocumentFragment();
    let pos = 0;
    for (const [a, b] of spans) {
      if (a < pos) continue;
      if (a > pos) frag.append(text.slice(pos, a));
      frag.append(el("mark", { class: "conv-word", text: text.slice(a, b) }));
      pos = b;
    }
    if (pos < text.length) frag.append(text.slice(pos));
    t.replaceWith(frag);
  }
}

async function openReader(box, project, sid, { at, before, agent, words } = {}) {
  const reader = { project, sid, agent: agent || null, prev: null, next: null, size: 0, tools: new Map() };
  const list = el("div", { class: "conv-items" });
  const status = el("p", { class: "counts conv-status" });
  const earlier = el("button", { type: "button", class: "conv-earlier", text: "Load earlier" });
  const later = el("button", { type: "button", class: "conv-later", text: "Load later" });
  const toEnd = el("button", { type: "button", class: "conv-end", text: "Jump to the end" });
  const close = el("button", { type: "button", class: "conv-close", text: "Close" });
  earlier.hidden = later.hidden = true;
  const bar = el("div", { class: "conv-bar" }, reader.agent ? el("span", { class: "counts", text: `sub-agent ${reader.agent}` }) : null, toEnd, close);
  box.replaceChildren(bar, earlier, list, later, status);
  box.classList.add("conv-open-reader");
  const restore = box.matches(".conv-sub, .result-reader") ? null : () => {
    box.classList.remove("conv-open-reader");
    box.replaceChildren(...readerButtons(box, project, sid));
  };
  close.onclick = () => { if (restore) restore(); else box.replaceChildren(); };

  const show = (page, where) => {
    const nodes = page.items.map(it => convNode(reader, it)).filter(n => n);
    if (where === "replace") list.replaceChildren(...nodes);
    else if (where === "before") list.prepend(...nodes);
    else list.append(...nodes);
    if (where !== "after") reader.prev = page.prev;
    if (where !== "before") reader.next = page.next;
    reader.size = page.size;
    earlier.hidden = reader.prev == null;
    later.hidden = reader.next == null;
    status.className = "counts conv-status";
    status.textContent = page.changed ? "The transcript changed while it was read: close and open it again." :
      (list.children.length ? "" : "Nothing to show here.");
  };
  const fetchPage = async (params, where) => {
    status.className = "counts conv-status";
    status.textContent = "loading…";
    try {
      const page = await api(convUrl(reader, params));
      show(page, where);
      return page;
    } catch (e) {
      status.className = "error conv-status";
      status.textContent = e.message;
      return null;
    }
  };
  earlier.onclick = () => fetchPage({ before: reader.prev }, "before");
  later.onclick = () => fetchPage({ after: reader.next }, "after");
  toEnd.onclick = () => { reader.tools.clear(); fetchPage({ before: CONV_END }, "replace"); };
  const params = at != null ? { at } : before != null ? { before } : {};
  const page = await fetchPage(params, "replace");
  if (page && at != null && page.target != null) {
    const hit = [...list.children].find(n => n.dataset.offset === String(page.target));
    if (hit) {
      hit.classList.add("conv-hit");
      if (words) highlight(hit, words);
      if (hit.tagName === "DETAILS") hit.open = true;
      hit.scrollIntoView({ block: "center" });
    }
  }
  return reader;
}

// Open the reader of session `sid` of `project` in its row (expanding the row); in the search
// mode "in conversations", under its result; in a panel above the list when neither is shown; `at`: a byte offset (a search hit) to show and
// highlight; `agent`: one of its sub-agents (agent-<id>). Resolves when the page is shown.
async function openConversation(project, sid, { at, agent, words } = {}) {
  let box = null;
  if (state.mode === "text") {  // the rows are hidden: under the session's search result, when it is listed
    const hit = [...$("#results").children].find(x => x.dataset.session === sid && (!project || x.dataset.project === project));
    if (hit) {
      box = $(".result-reader", hit) || hit.appendChild(el("div", { class: "conversation result-reader" }));
      box.scrollIntoView({ block: "nearest" });
    }
  }
  const shownRow = !box && state.mode !== "text" && list.ids.has(sid) ? reveal(list.ids.get(sid)) : null;
  const li = box || state.mode === "text" || !shownRow || (project && shownRow.dataset.project !== project) ? null : shownRow;
  const row = state.rows.get(sid);
  if (li && row) {
    state.open.add(sid);
    if ($(".detail", li).hidden || !$(".detail .conversation", li)) await openDetail(li, row);
    box = $(".detail .conversation", li);
  }
  if (!box) {
    const old = $("#reader");
    if (old) old.remove();
    box = el("div", { class: "conversation" });
    const panel = el("section", { id: "reader", class: "detail" }, el("h3", { text: `Conversation of ${sid}` }), box);
    $("#list").prepend(panel);
    box.scrollIntoView({ block: "start" });
  }
  return openReader(box, project, sid, { at, agent, words });
}
window.openConversation = openConversation;

// ---------------------------------------------------------------- search in the conversations
// The search box's second mode ("in conversations"): /api/search, the full-text index of every
// transcript, instead of the listing. A snippet comes as text with its hits' [start, end) spans,
// counted in code points (Python's indices): it is cut here into text nodes and <mark>s, never
// parsed as HTML. While the index is first built the answer covers what is indexed so far: the
// page polls /api/search/status every second and searches again once it is done.

const SEARCH_LIMIT = 20, SEARCH_MORE = 50;  // results asked for; "show more" asks for the API's most
const search = { gen: 0, ctrl: null, poll: 0, limit: SEARCH_LIMIT };

function plural(n, one, many = one + "s") { return `${num(n)} ${n === 1 ? one : many}`; }
function when(ts) { return ts && Number.isFinite(ts) ? localMs(ts * 1000) : ""; }
function note(sel, text) { const n = $(sel); n.textContent = text || ""; n.hidden = !text; }

// `text` with the spans `marks` (code point offsets) in <mark>s: text nodes only.
function markedText(text, marks) {
  const chars = Array.from(text);
  const out = document.createDocumentFragment();
  let pos = 0;
  for (const [a, b] of [...marks].sort((x, y) => x[0] - y[0])) {
    const start = Math.max(a, pos), end = Math.min(b, chars.length);
    if (end <= start) continue;
    if (start > pos) out.append(chars.slice(pos, start).join(""));
    out.append(el("mark", { text: chars.slice(start, end).join("") }));
    pos = end;
  }
  if (pos < chars.length) out.append(chars.slice(pos).join(""));
  return out;
}

async function copyResume(li, r) {
  if (!$(".cmd", li)) $(".line", li).after(el("code", { class: "cmd", text: r.resume }));
  try { await navigator.clipboard.writeText(r.resume); flash(li, "resume command copied"); }
  catch { flash(li, "select the command to copy it"); }
}

function resultNode(r) {
  // no cwd known: `project` is Claude Code's folder name, not a registered path (the API then finds the session)
  const project = r.cwd ? r.project : "";
  const words = queryWords($("#search").value);
  const open = (sn) => openConversation(project, r.id, sn ? { at: sn.offset, agent: sn.agent, words } : {});
  const li = el("li", { class: "result" });
  li.dataset.session = r.id;
  li.dataset.project = project;
  const title = el("button", { type: "button", class: "title", title: `${r.id}: open the conversation at its best hit`,
                               text: r.title || `session ${r.id.slice(0, 8)}`, onclick: () => open(r.snippets[0]) });
  if (r.title_source === "prompt") title.classList.add("from-prompt");
  li.append(el("div", { class: "line" }, title,
    el("span", { class: "fields", title: "what matched", text: (r.fields || []).filter(f => f !== "conversation").join(", ") }),
    el("span", { class: "hits", text: r.hits ? plural(r.hits, "hit") : "" }),
    r.branch ? el("span", { class: "branch", title: r.branch, text: r.branch }) : null,
    el("span", { class: "project", title: r.project, text: r.project.split("/").pop() }),
    el("span", { class: "age", title: when(r.last_ts), text: r.age && r.age !== "?" ? `${r.age} ago` : "" }),
    el("button", { type: "button", class: "resume", title: r.resume, text: "Resume", onclick: () => copyResume(li, r) })));
  if (r.snippets.length) {
    li.append(el("ul", { class: "snippets" }, ...r.snippets.map(sn => el("li", {},
      el("button", { type: "button", class: `snippet snip-${sn.role}${sn.sidechain ? " snip-sub" : ""}`,
                     title: `open the conversation here${sn.ts ? ` (${when(sn.ts)})` : ""}`, onclick: () => open(sn) },
         el("span", { class: "snip-role", text: sn.sidechain ? `sub-agent ${sn.role}` : sn.role }),
         el("span", { class: "snip-text" }, markedText(sn.text, sn.marks)))))));
  }
  if (r.also_in && r.also_in.length) {  // copied into forks: said here, listed once
    li.append(el("p", { class: "search-note also-in", title: r.also_in.join(", "),
                        text: `also in its fork${r.also_in.length > 1 ? "s" : ""} ${r.also_in.map(f => f.slice(0, 8)).join(", ")} (copied there)` }));
  }
  return li;
}

function searchUrl(q) {
  const p = new URLSearchParams({ q, limit: String(search.limit) });
  if (state.project) p.set("project", state.project);
  if (state.tag) p.set("tag", state.tag);
  if ($("#search-tools").checked) p.set("tools", "1");
  for (const k of ["role", "since"]) { const v = $(`#search-${k}`).value; if (v) p.set(k, v); }
  return `/api/search?${p}`;
}

function showIndexing(s) {
  const pct = s.total_bytes > 0 ? ` ${Math.min(99, Math.floor(100 * s.done_bytes / s.total_bytes))}%` : "";
  note("#search-index", `Indexing conversations…${pct} (the results cover what is indexed so far)`);
}

function showResults(data) {
  const n = data.results.length;
  // the header's count follows the mode: here, the sessions whose conversations match
  $("#progress").textContent = `${num(data.total)} of ${plural(list.everything, "session")} (conversations)`;
  const summary = $("#search-summary");
  summary.textContent = !n ? "No session matches." : data.total > n ? `${plural(data.total, "session")} match, showing ${n}`
    : `${plural(n, "session")} ${n === 1 ? "matches" : "match"}`;
  summary.append(el("span", { class: "search-time", text: ` · ${data.seconds.toFixed(2)} s` }));
  if (data.total > n && search.limit < SEARCH_MORE) {
    summary.append(" ", el("button", { type: "button", class: "search-more", text: `show up to ${SEARCH_MORE}`,
                                       onclick: () => { search.limit = SEARCH_MORE; runSearch({ keepLimit: true }); } }));
  }
  note("#search-problems", data.problems.length ? `Not everything could be searched: ${data.problems.join("; ")}` : "");
  $("#results").replaceChildren(...data.results.map(resultNode));
}

function stopSearch() {
  search.gen += 1;
  if (search.ctrl) search.ctrl.abort();
  search.ctrl = null;
  clearTimeout(search.poll);
  $("#search-panel").classList.remove("busy");
}

async function runSearch({ keepLimit = false } = {}) {
  stopSearch();
  const gen = search.gen;
  if (!keepLimit) search.limit = SEARCH_LIMIT;
  const q = $("#search").value.trim();
  note("#search-error", "");
  if (!q) {
    for (const id of ["#search-index", "#search-problems"]) note(id, "");
    $("#search-summary").textContent = 'Type words to find them in every conversation ("a phrase", pref*, a OR b, NOT c).';
    $("#results").replaceChildren();
    return;
  }
  const ctrl = search.ctrl = new AbortController();
  $("#search-panel").classList.add("busy");
  if (!$("#results").children.length) $("#search-summary").textContent = "searching…";
  let data;
  try {
    data = await api(searchUrl(q), { signal: ctrl.signal });
  } catch (e) {
    if (gen !== search.gen) return;  // a newer search (or the other mode) took over
    search.ctrl = null;
    $("#search-panel").classList.remove("busy");
    for (const id of ["#search-index", "#search-problems"]) note(id, "");
    $("#search-summary").textContent = "";
    $("#results").replaceChildren();
    note("#search-error", e.message);
    return;
  }
  if (gen !== search.gen) return;
  search.ctrl = null;
  $("#search-panel").classList.remove("busy");
  showResults(data);
  if (data.index.updating) { showIndexing(data.index); pollIndex(gen); }
  else note("#search-index", "");
}

function pollIndex(gen) {
  clearTimeout(search.poll);
  search.poll = setTimeout(async () => {
    let s;
    try { s = await api("/api/search/status"); }
    catch (e) { if (gen === search.gen) note("#search-index", e.message); return; }
    if (gen !== search.gen) return;
    if (s.updating) { showIndexing(s); pollIndex(gen); }
    else { note("#search-index", ""); runSearch({ keepLimit: true }); }  // done: the whole index answers now
  }, 1000);
}

function setMode(mode) {
  if (mode === state.mode) return;
  state.mode = mode;
  const text = mode === "text";
  document.body.classList.toggle("mode-text", text);
  for (const b of document.querySelectorAll("#search-mode button")) {
    b.classList.toggle("on", b.dataset.mode === mode);
    b.setAttribute("aria-pressed", String(b.dataset.mode === mode));
  }
  for (const b of document.querySelectorAll("#filters button")) b.disabled = text;  // they filter the list
  $("#filters").title = text ? "These filter the session list, not the search in conversations" : "";
  $("#search-panel").hidden = !text;
  const box = $("#search");
  box.placeholder = text ? 'Search every conversation: words, "a phrase", pref*, NOT x' : "Search titles, prompts, notes, ids";
  if (text) runSearch();
  else {
    stopSearch();
    showCount();
    const q = box.value.trim();
    if (q !== state.q) { state.q = q; load(); }
  }
  box.focus();
}

function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }

document.addEventListener("DOMContentLoaded", () => {
  if (!token()) return;  // on the way to /welcome
  for (const b of document.querySelectorAll("#filters button")) {
    b.addEventListener("click", () => {
      state.filter = b.dataset.filter;
      for (const x of document.querySelectorAll("#filters button")) x.classList.toggle("on", x === b);
      load();
    });
  }
  $("#rail-filter").addEventListener("input", renderRail);  // the rail alone: no request
  const box = $("#search");
  let typing = 0;
  const onQuery = () => {
    clearTimeout(typing);
    if (state.mode === "text") runSearch();
    else { state.q = box.value.trim(); load(); }
  };
  box.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(onQuery, 250); });
  box.addEventListener("keydown", (e) => { if (e.key === "Enter") onQuery(); });
  for (const b of document.querySelectorAll("#search-mode button")) b.addEventListener("click", () => setMode(b.dataset.mode));
  for (const id of ["#search-tools", "#search-role", "#search-since"]) $(id).addEventListener("change", () => runSearch());
  for (const h of document.querySelectorAll("#columns button[data-sort]")) h.addEventListener("click", () => sortBy(h.dataset.sort));
  $("#notify").addEventListener("click", toggleNotify);
  $("#keep-all").addEventListener("click", keepAll);
  showNotify();
  document.addEventListener("keydown", onKey);
  const header = $("header");
  new ResizeObserver(() => document.documentElement.style.setProperty("--header-h", `${header.offsetHeight}px`)).observe(header);
  // The window of rows follows the scroll; more rows as the end of those loaded comes near.
  window.addEventListener("scroll", queueDraw, { passive: true });
  window.addEventListener("resize", queueDraw, { passive: true });
  new ResizeObserver(queueDraw).observe($("#rows"));  // a row opened or closed: measured again
  $("#rows").addEventListener("focusin", (e) => { const li = rowOf(e.target); if (li) list.focused = li.dataset.id; });
  if (location.hash !== USAGE_VIEW) startSessions();  // else once the sessions are shown (usage.js)
});

// The listing and its change stream, started when the sessions are first shown.
let sessionsStarted = false;
function startSessions() {
  if (sessionsStarted) return;
  sessionsStarted = true;
  load().then(() => follow("/api/events", {  // the change stream once the first rows are up
    // The stream's baseline is taken when it opens: a change between the first rows and then
    // (or while it was cut off) would be missed, so each opening reloads what the page shows.
    open: () => applyChange({ rows: null }),
    event: (type, data) => {
      if (type !== "change") return;
      let c = null;
      try { c = JSON.parse(data); } catch { c = { rows: null }; }
      applyChange(c);
    },
  }));
}
