// c3async Hub: the Usage page (#usage). Tokens and cost per day and per 5-hour window, stacked
// by project (/api/usage?by=day|window), drawn as SVG here; the current 5-hour and weekly
// windows as bars; the live sessions' burn as a table. Every name and title is set as text
// (textContent, SVG <title>), never parsed as markup. Uses app.js's api(), el(), $ and figures.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART_H = 240;
const PAD = { left: 64, right: 10, top: 12, bottom: 40 };
const REFRESH_MS = 60_000;  // the Hub's accountant brings the timelines up to date every minute
// widths: each chart box's width as a ResizeObserver last reported it (drawing reads no layout:
// a chart is first drawn in the observer's first report, after layout and before the paint)
const usage = { data: {}, metric: "cost", timer: 0, gen: 0, widths: {} };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text != null) node.textContent = text;
  return node;
}

function usageUrl(by) {
  const since = $(`#chart-${by} select`).value;
  return `/api/usage?by=${by}&since=${encodeURIComponent(since)}`;
}

function value(part) { return usage.metric === "cost" ? part.cost_usd : part.tokens; }
function axisFigure(v) { return usage.metric === "cost" ? (v >= 1000 ? `$${compact(v)}` : `$${+v.toFixed(2)}`) : compact(v); }
function exact(part) {
  return `${costFigure(part.cost_usd, part.unpriced ? ["?"] : [])} · ${num(part.tokens)} tokens ` +
    `(input ${num(part.input)}, output ${num(part.output)}, cache write ${num(part.cache_write)}, ` +
    `cache read ${num(part.cache_read)}) · ${plural(part.responses, "response")}`;
}

// A step of 1, 2 or 5 times a power of ten giving about `n` ticks up to `max`.
function ticks(max, n = 4) {
  if (!(max > 0)) return [0];
  const raw = max / n, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  const out = [];
  for (let v = 0; v <= max + step * 0.001; v += step) out.push(v);
  if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
  return out;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
// "2026-11-03" -> "Nov 3"; "2026-11-03 14:00" -> "Nov 3 14:00" (the bucket's own local time)
function bucketLabel(name) {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?: (\d{2}:\d{2}))?$/.exec(name);
  if (!m) return name;
  return `${MONTHS[Number(m[2]) - 1]} ${Number(m[3])}${m[4] ? ` ${m[4]}` : ""}`;
}

// Each project's colour in a chart: its place in the legend (the largest first); "other
// projects" (project null) grey.
function colour(data, project) {
  if (project === null) return "cx";
  return `c${data.projects.findIndex(p => p.project === project)}`;
}

function drawChart(by) {
  // drawn once both its data and its box's width (the ResizeObserver's first report) are in
  const data = usage.data[by], width = usage.widths[by], fig = $(`#chart-${by}`), box = $(".chart", fig);
  if (!data || width == null) return;
  const plotW = width - PAD.left - PAD.right, plotH = CHART_H - PAD.top - PAD.bottom;
  const bars = data.buckets, what = usage.metric === "cost" ? "cost (USD)" : "tokens";
  const per = by === "day" ? "day" : "5-hour window";
  const ys = ticks(Math.max(0, ...bars.map(value)));
  const top = ys[ys.length - 1] || 1;
  const y = v => PAD.top + plotH - (v / top) * plotH;
  const total = bars.reduce((s, b) => s + value(b), 0);
  const titleId = `${by}-title`, descId = `${by}-desc`;
  const root = svg("svg", { width, height: CHART_H, viewBox: `0 0 ${width} ${CHART_H}`, role: "group",
                            "aria-labelledby": titleId, "aria-describedby": descId, class: "usage-svg" });
  const range = bars.length ? ` from ${bars[0].bucket} to ${bars[bars.length - 1].bucket}` : "";
  root.append(svg("title", { id: titleId }, `${what[0].toUpperCase()}${what.slice(1)} per ${per}, stacked by project`),
    svg("desc", { id: descId }, bars.length
      ? `${plural(bars.length, per)}${range}; in all ${usage.metric === "cost" ? usd(total) : `${num(total)} tokens`}`
      : "No usage counted in this period"));
  const grid = svg("g", { class: "grid", "aria-hidden": "true" });
  for (const v of ys) {
    grid.append(svg("line", { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v) }),
                svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, axisFigure(v)));
  }
  grid.append(svg("text", { x: 12, y: PAD.top + plotH / 2, transform: `rotate(-90 12 ${PAD.top + plotH / 2})`,
                            "text-anchor": "middle", class: "axis-title" }, what));
  grid.append(svg("text", { x: PAD.left + plotW / 2, y: CHART_H - 4, "text-anchor": "middle", class: "axis-title" },
                  by === "day" ? "day (local time)" : "5-hour window, by its start (local time)"));
  root.append(grid);
  const band = plotW / Math.max(1, bars.length), barW = Math.max(2, Math.min(48, band * 0.76));
  const every = Math.ceil((by === "day" ? 46 : 78) / band);  // labels that do not overlap
  const xs = svg("g", { class: "x-labels", "aria-hidden": "true" });
  const list = svg("g", { role: "list" });
  bars.forEach((b, i) => {
    const x = PAD.left + i * band + (band - barW) / 2;
    const g = svg("g", { class: "bar", tabindex: "0", role: "listitem", "data-index": i,
                         "aria-label": `${b.bucket}: ${exact(b)}` });
    // the whole band answers the pointer (a thin bar is hard to hit); the parts above it say which
    g.append(svg("rect", { x: PAD.left + i * band, y: PAD.top, width: band, height: plotH, class: "hit" }));
    let base = 0;
    b.parts.forEach((part, j) => {
      const v = value(part);
      if (!(v > 0)) return;
      const h = Math.max(0.5, y(base) - y(base + v));
      g.append(svg("rect", { x, y: y(base + v), width: barW, height: h, class: colour(data, part.project), "data-part": j }));
      base += v;
    });
    list.append(g);
    if (i % every === 0) {  // the last label ends at the edge rather than past it
      const mid = x + barW / 2, near = mid + (by === "day" ? 23 : 39) > width;
      xs.append(svg("text", { x: near ? width - 2 : mid, y: PAD.top + plotH + 16, "text-anchor": near ? "end" : "middle" }, bucketLabel(b.bucket)));
    }
  });
  root.append(list, xs);
  if (!bars.length) root.append(svg("text", { x: PAD.left + plotW / 2, y: PAD.top + plotH / 2, "text-anchor": "middle", class: "empty" }, "no usage counted in this period"));
  box.replaceChildren(root);
  drawLegend(fig, data);
}

function drawLegend(fig, data) {
  $(".legend", fig).replaceChildren(...data.projects.map(p => el("li", { title: p.project || "the projects past the largest ones" },
    el("span", { class: `swatch ${colour(data, p.project)}`, "aria-hidden": "true" }),
    el("span", { class: "legend-name", text: p.name }),
    el("span", { class: "legend-figure", text: usage.metric === "cost" ? costFigure(p.cost_usd, p.unpriced ? ["?"] : []) : compact(p.tokens) }))));
}

// The tooltip: the bucket's exact figures and each project's, the one pointed at in bold.
function showTip(g, at) {
  const by = g.closest(".usage-chart").dataset.by, data = usage.data[by];
  const b = data && data.buckets[Number(g.dataset.index)];
  if (!b) return;
  const tip = $("#usage-tip");
  const pointed = at && at.target.dataset.part != null ? Number(at.target.dataset.part) : -1;
  const name = p => p.project === null ? "other projects" : (data.projects.find(q => q.project === p.project) || {}).name || p.project;
  const when = b.rule && b.rule !== "calendar" ? ` (${b.rule === "reported" ? "as Claude Code reported it" : "ccusage's rule"})` : "";
  tip.replaceChildren(el("b", { text: `${b.bucket}${by === "window" ? ` to ${(b.end || "").slice(11, 16)}` : ""}${when}` }),
    el("div", { text: `all projects: ${exact(b)}` }),
    ...b.parts.slice().reverse().map((p) => {
      const j = b.parts.indexOf(p);
      return el("div", { class: j === pointed ? "tip-part on" : "tip-part" },
        el("span", { class: `swatch ${colour(data, p.project)}`, "aria-hidden": "true" }),
        `${name(p)}: ${exact(p)}`);
    }));
  tip.hidden = false;
  const r = g.getBoundingClientRect(), w = tip.offsetWidth, h = tip.offsetHeight;
  const x = at && at.clientX != null ? at.clientX : r.left + r.width / 2;
  const yTop = at && at.clientY != null ? at.clientY : r.top;
  tip.style.left = `${Math.max(4, Math.min(innerWidth - w - 4, x - w / 2))}px`;
  tip.style.top = `${yTop - h - 12 >= 4 ? yTop - h - 12 : Math.min(innerHeight - h - 4, yTop + 20)}px`;
}
function hideTip() { $("#usage-tip").hidden = true; }

function until(iso) {
  const s = (Date.parse(iso || "") - Date.now()) / 1000;
  if (!(s > 0)) return "";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h >= 48 ? ` (in ${Math.floor(h / 24)}d ${h % 24}h)` : ` (in ${h ? `${h}h` : ""}${m}m)`;
}
// "Mon 17:42", local time, on the 24-hour clock as the charts' labels and the status line
// (written out: no Intl formatter, whose first costs the page ICU's 15-30 ms before it paints)
const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
function clock(iso) {
  const t = Date.parse(iso || "");
  if (!t) return "";
  const d = new Date(t), two = v => String(v).padStart(2, "0");
  return `${WEEKDAYS[d.getDay()]} ${two(d.getHours())}:${two(d.getMinutes())}`;
}
const RULES = { reported: "as Claude Code reported it", ccusage: "no reset recorded: ccusage's rule",
                calendar: "no reset recorded: the calendar week" };

function runwayText(w) {
  const r = w.runway;  // the burn's calibration: hits_at (null: not before the reset), or a reason
  if (r == null) return w.samples ? `no runway: ${plural(w.samples, "recorded sample")} are not enough to calibrate`
    : "no runway: no recorded samples";
  if (r.reason) return `no runway: ${r.reason}`;
  const n = r.samples ?? w.samples;
  const from = n ? `, from ${plural(n, "sample")}` : "";
  if (r.hits_at == null) return `does not reach 100% before the reset at this pace${from}`;
  const at = new Date(r.hits_at * 1000).toISOString();  // epoch seconds
  return `reaches 100% at ${clock(at)}${until(at)} at this pace${from}`;
}

function drawWindows(data) {
  $("#usage-windows").replaceChildren(...(data.windows || []).map(w => {
    const used = typeof w.used === "number" ? Math.max(0, Math.min(100, w.used)) : null;
    const fill = el("div", { class: `fill${used != null && used >= 90 ? " high" : ""}` });
    fill.style.width = `${used ?? 0}%`;
    const meter = el("div", { class: "meter", role: "meter", "aria-valuemin": "0", "aria-valuemax": "100",
                              "aria-label": `${w.name} window used`,
                              "aria-valuetext": used == null ? "not reported" : `${used}%` }, fill);
    if (used != null) meter.setAttribute("aria-valuenow", String(used));
    return el("div", { class: "window", "data-window": w.window },
      el("div", { class: "window-head" }, el("b", { text: `${w.name} window` }),
        el("span", { class: "window-used", text: used == null ? "used: not reported" : `${+used.toFixed(1)}% used` })),
      meter,
      el("p", { class: "window-line", text: w.resets_at ? `resets ${clock(w.resets_at)}${until(w.resets_at)} · ${RULES[w.rule] || w.rule || ""}`
        : "no usage counted in a current window" }),
      el("p", { class: "window-line runway", text: runwayText(w) }),
      el("p", { class: "window-line", text: w.resets_at ? `counted in it: ${exact(w)}` : "" }));
  }), ...refusals(data.refusals || []));
}

// Usage-limit refusals the transcripts recorded (the newest the accounting kept): as text only.
function refusals(rows) {
  if (!rows.length) return [];
  const iso = t => new Date(t * 1000).toISOString();
  return [el("div", { class: "refusals" }, el("b", { text: `Refused at the limit (${rows.length})` }),
    el("ul", {}, ...rows.slice(-20).reverse().map(r => el("li", { "data-session": r.session || "",
      text: `${clock(iso(r.t))}: the ${r.window || "unknown"} window, resets ${r.resets_at ? clock(iso(r.resets_at)) : "unknown"}`
        + ` · ${(r.project || "").split("/").pop()} · session ${(r.session || "").slice(0, 8)}` }))))];
}

function drawBurn(data) {
  const rows = data.live || [];
  $("#burn-empty").hidden = rows.length > 0;
  $("#burn").hidden = !rows.length;
  $("#burn tbody").replaceChildren(...rows.map(r => el("tr", { "data-id": r.id },
    el("td", { class: "burn-title", title: r.id, text: r.title || `session ${r.id.slice(0, 8)}` }),
    el("td", { title: r.project, text: r.name }),
    el("td", { text: r.state || "" }),
    el("td", { class: "n", title: num(r.tokens_per_hour), text: compact(r.tokens_per_hour) }),
    el("td", { class: "n", text: usd(r.cost_per_hour) }),
    el("td", { class: "n", title: `${num(r.window_tokens)} tokens`, text: `${compact(r.window_tokens)} · ${usd(r.window_cost)}` }),
    el("td", { class: "n", text: r.share == null ? "–" : `${Math.round(r.share * 100)}%` }))));
}

function status(text, error = false) {
  const s = $("#usage-status");
  s.textContent = text;
  s.classList.toggle("error", error);
}

async function loadUsage() {
  const gen = ++usage.gen;
  clearTimeout(usage.timer);
  await Promise.all(["day", "window"].map(async by => {
    let data;
    try { data = await api(usageUrl(by)); }
    catch (e) { if (gen === usage.gen) status(e.message, true); return; }
    if (gen !== usage.gen) return;
    usage.data[by] = data;
    drawChart(by);
    drawWindows(data);
    drawBurn(data);
    status(data.as_of ? `as of ${clock(data.as_of)}` : "nothing accounted yet");
  }));
  if (gen === usage.gen && showingUsage()) usage.timer = setTimeout(loadUsage, REFRESH_MS);
}

function showingUsage() { return location.hash === USAGE_VIEW; }

// The view follows the URL's fragment (#usage), so a reload keeps it.
function showView() {
  const on = showingUsage();
  document.documentElement.classList.toggle("view-usage", on);
  $("#usage").hidden = !on;
  $("#main").hidden = on;
  $("h1").textContent = on ? "Usage" : "Sessions";
  for (const a of document.querySelectorAll("#views a")) {
    if ((a.dataset.view === "usage") === on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (on) { document.title = "Usage · c3async Hub"; loadUsage(); }
  else { clearTimeout(usage.timer); usage.gen++; hideTip(); document.title = "Sessions · c3async Hub"; startSessions(); }
}

document.addEventListener("DOMContentLoaded", () => {
  if (!token()) return;  // on the way to /welcome
  for (const b of document.querySelectorAll("#usage-metric button")) {
    b.addEventListener("click", () => {
      usage.metric = b.dataset.metric;
      for (const x of document.querySelectorAll("#usage-metric button")) {
        x.classList.toggle("on", x === b);
        x.setAttribute("aria-pressed", String(x === b));
      }
      drawChart("day"); drawChart("window");
    });
  }
  for (const fig of document.querySelectorAll(".usage-chart")) {
    $("select", fig).addEventListener("change", loadUsage);
    const box = $(".chart", fig);
    box.addEventListener("pointermove", e => { const g = e.target.closest(".bar"); if (g) showTip(g, e); else hideTip(); });
    box.addEventListener("pointerleave", hideTip);
    box.addEventListener("focusin", e => { const g = e.target.closest(".bar"); if (g) showTip(g, null); });
    box.addEventListener("focusout", hideTip);
  }
  document.addEventListener("keydown", e => { if (e.key === "Escape") hideTip(); });
  // A chart is drawn again when its box's width changes (the window resized, a scrollbar came),
  // after layout and before paint: drawing then never forces a layout of its own.
  const sized = new ResizeObserver(entries => {
    for (const e of entries) {
      const by = e.target.closest(".usage-chart").dataset.by;
      if (!e.contentRect.width) { delete usage.widths[by]; continue; }  // hidden: measured when shown
      const width = Math.max(280, Math.round(e.contentRect.width));
      if (width === usage.widths[by]) continue;
      usage.widths[by] = width;
      if (showingUsage()) drawChart(by);
    }
  });
  for (const box of document.querySelectorAll(".usage-chart .chart")) sized.observe(box);
  window.addEventListener("hashchange", showView);
  showView();
});
