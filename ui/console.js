// The toolrouter console: reads the JSON endpoints of `toolrouter serve`
// with the key typed in (kept in this tab's sessionStorage) and draws them.
// Every text from the server (tool descriptions, API responses, tasks) is
// set with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let overviewTimer = null;
let charts = {};

// An element with attributes and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "href") e.setAttribute("href", v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmt(x, digits) {
  if (x === null || x === undefined) return "–";
  return typeof x === "number" ? x.toFixed(digits === undefined ? 3 : digits) : String(x);
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

// fetch with the key; resolves to JSON, or throws the server's message.
async function api(path, body) {
  const headers = { "content-type": "application/json" };
  const key = sessionStorage.getItem("toolrouter-key");
  if (key) headers.authorization = "Bearer " + key;
  const init = body === undefined ? { headers } : { method: "POST", headers, body: JSON.stringify(body) };
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : text;
    throw new Error(response.status + ": " + message);
  }
  return data;
}

function apiLink(name, view) {
  return el("a", { href: "#" + (view || "apis") + "/" + encodeURIComponent(name), class: "api" }, name);
}

function graphLink(name) {
  return el("a", { href: "#graph/" + encodeURIComponent(name), class: "graph-link" }, "graph");
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// ---- Overview ------------------------------------------------------------

function card(title, value, detail) {
  return el("div", { class: "card" }, el("div", { class: "title" }, title), el("div", { class: "value" }, value),
    detail ? el("div", { class: "detail" }, detail) : null);
}

function chart(id, series, data) {
  const target = $(id);
  const width = Math.max(280, target.clientWidth || 360);
  if (charts[id]) {
    charts[id].setData(data);
    return;
  }
  // One sample (or none) has no time span: show the minutes around it, not
  // the 1,000 days uPlot gives a single time in seconds.
  const around = (u, min, max) => {
    const xs = u.data[0] || [];
    if (xs.length > 1) return [min, max];
    const t = xs.length ? xs[0] : Date.now() / 1000;
    return [t - 60, t + 60];
  };
  const opts = { width, height: 180, series: [{}].concat(series), axes: [{}, {}], scales: { x: { time: true, range: around } } };
  charts[id] = new uPlot(opts, data, target);
}

async function loadOverview() {
  try {
    const o = await api("/v1/console/overview");
    showError("");
    $("readiness").textContent = o.readiness;
    $("readiness").className = "readiness " + (o.readiness === "ready" ? "ok" : "degraded");
    const cards = [
      card("Catalog", o.catalog.apis + " APIs", o.catalog.tools + " tools, " + o.catalog.categories + " categories"),
      card("Index", o.index.mode, o.index.ready ? "searchable" : "calls only"),
      card("Tool graph", o.graph.nodes + " nodes", o.graph.edges + " edges, " + o.graph.online_runs + " runs learned"),
      card("Memory", o.memory + " runs", "remembered successful paths"),
    ];
    if (o.cluster) {
      cards.push(card("Cluster", o.cluster.up ? "Redis up" : "Redis down",
        (o.cluster.outbox || 0) + " runs waiting, " + (o.cluster.applied || 0) + " applied from replicas"));
    }
    const last = o.series[o.series.length - 1] || {};
    cards.push(card("Now", fmt(last.requests_per_s, 1) + " req/s", "p99 " + fmt(last.p99_ms, 1) + " ms"));
    $("cards").replaceChildren(...cards);
    const t = o.series.map((p) => p.t / 1000);
    chart("chart-rps", [{ label: "requests/s", stroke: "#2563eb" }], [t, o.series.map((p) => p.requests_per_s)]);
    chart("chart-latency", [
      { label: "p50", stroke: "#16a34a" }, { label: "p95", stroke: "#ca8a04" }, { label: "p99", stroke: "#dc2626" },
    ], [t, o.series.map((p) => p.p50_ms), o.series.map((p) => p.p95_ms), o.series.map((p) => p.p99_ms)]);
    chart("chart-calls", [
      { label: "calls ok", stroke: "#16a34a" }, { label: "calls failed", stroke: "#dc2626" },
      { label: "rate-limited", stroke: "#9333ea" },
    ], [t, o.series.map((p) => p.tool_ok), o.series.map((p) => p.tool_failed), o.series.map((p) => p.refused)]);
    fill($("downstream").tBodies[0], o.downstream.map((h) =>
      el("tr", {}, el("td", {}, h.server), el("td", {}, h.state), el("td", {}, h.tools), el("td", {}, h.reconnects),
        el("td", {}, h.error || ""))));
  } catch (e) {
    showError(e.message);
  }
}

// ---- Search and plan -----------------------------------------------------

function signal(s) {
  return s ? "#" + s.rank + " (" + fmt(s.score) + ")" : "–";
}

async function search(event) {
  event.preventDefault();
  const query = $("query").value.trim();
  if (!query) return;
  try {
    const r = await api("/v1/tools/search", { query, k: Number($("k").value) || 10 });
    showError("");
    $("intents").textContent = r.intents.length ? "Intents: " + r.intents.join(" · ") : "";
    fill($("results").tBodies[0], r.data.map((d, i) => el("tr", { class: "hit" },
      el("td", {}, i + 1), el("td", {}, apiLink(d.name), " ", graphLink(d.name)),
      el("td", {}, fmt(d.score)), el("td", {}, fmt(d.availability, 2)), el("td", {}, signal(d.why.lexical)),
      el("td", {}, signal(d.why.dense)), el("td", {}, d.why.remembered ? "yes" : ""),
      el("td", { class: "description" }, d.definition.function.description))));
  } catch (e) {
    showError(e.message);
  }
}

async function plan() {
  const query = $("query").value.trim();
  if (!query) return;
  try {
    const run = await api("/v1/plan", { query });
    showError("");
    const path = run.steps.map((s) => s.function).join(" → ") || "(no call)";
    $("plan-summary").textContent = "Path: " + path + " — " + run.ending.ending + " (" + run.ending.reason + "), " +
      run.backtracks + " backtracks, " + fmt(run.timings.planning_ms, 1) + " ms";
    drawPlanTree(run);
    $("plan-moves").replaceChildren(...run.trace.map((ev) => el("li", { class: "move " + ev.move },
      el("b", {}, ev.move), " from ", ev.from || "start", ev.function ? " to " + ev.function : "", ": ", ev.reason,
      ev.note ? " (" + ev.note + ")" : "")));
  } catch (e) {
    showError(e.message);
  }
}

// The planner's search as a tree: each decision's candidates hang under the
// node decided from; the moves taken are drawn bold, backtracks red.
function drawPlanTree(run) {
  const nodes = [{ data: { id: "start", label: "start" }, classes: "root" }];
  const edges = [];
  let depth = 0;
  let current = "start";
  const stack = [];
  run.trace.forEach((ev, i) => {
    const parent = current;
    ev.candidates.forEach((c) => {
      const id = "e" + i + ":" + c.function;
      const taken = ev.move === "next" && ev.function === c.function;
      nodes.push({ data: { id, label: c.function + "\nscore " + fmt(c.score, 2) }, classes: taken ? "taken" : "" });
      edges.push({ data: { id: "x" + id, source: parent, target: id }, classes: taken ? "taken" : "" });
      if (taken) { stack.push(current); current = id; depth += 1; }
    });
    if (ev.move === "backtrack") {
      const back = "b" + i;
      nodes.push({ data: { id: back, label: "backtrack: " + ev.reason }, classes: "backtrack" });
      edges.push({ data: { id: "x" + back, source: parent, target: back }, classes: "backtrack" });
      current = stack.pop() || "start";
    } else if (ev.move === "finish") {
      const end = "f" + i;
      nodes.push({ data: { id: end, label: "finish" }, classes: "finish" });
      edges.push({ data: { id: "x" + end, source: parent, target: end }, classes: "taken" });
    }
  });
  draw("plan-tree", nodes, edges, { name: "breadthfirst", directed: true, roots: "#start", spacingFactor: 0.9 });
}

// ---- Tool graph ----------------------------------------------------------

let graphView = null;

function draw(id, nodes, edges, layout, onTap) {
  const container = $(id);
  if (container._cy) container._cy.destroy();
  const cy = cytoscape({
    container,
    elements: { nodes, edges },
    layout,
    wheelSensitivity: 0.2,
    style: [
      { selector: "node", style: { label: "data(label)", "font-size": 9, "text-wrap": "wrap", "text-valign": "bottom",
        "background-color": "#94a3b8", width: 14, height: 14 } },
      { selector: "node.center", style: { "background-color": "#2563eb", width: 22, height: 22 } },
      { selector: "node.root, node.finish", style: { "background-color": "#0f172a" } },
      { selector: "node.taken", style: { "background-color": "#16a34a" } },
      { selector: "node.backtrack", style: { "background-color": "#dc2626" } },
      { selector: "edge", style: { width: 1, "line-color": "#cbd5e1", "target-arrow-shape": "triangle",
        "target-arrow-color": "#cbd5e1", "curve-style": "bezier", label: "data(label)", "font-size": 8,
        "text-rotation": "autorotate", "text-background-color": "#fff", "text-background-opacity": 0.85 } },
      { selector: "edge.taken", style: { width: 3, "line-color": "#16a34a", "target-arrow-color": "#16a34a" } },
      { selector: "edge.backtrack", style: { "line-color": "#dc2626", "target-arrow-color": "#dc2626" } },
    ],
  });
  if (onTap) cy.on("tap", "node", (e) => onTap(e.target.data("function")));
  container._cy = cy;
  return cy;
}

async function showGraph(name) {
  try {
    const summary = await api("/v1/graph");
    showError("");
    $("graph-summary").textContent = summary.nodes + " nodes, " + summary.edges + " edges, " +
      summary.online_runs + " runs learned online";
    $("heaviest").replaceChildren(...summary.heaviest.map((h) => el("li", {}, apiLink(h.from, "graph"), " → ",
      apiLink(h.to, "graph"), " (" + h.count + " in trajectories, " + h.online + " online)")));
    $("recent-runs").replaceChildren(...summary.recent.map((r) => el("li", {},
      new Date(r.at_unix_ms).toLocaleTimeString() + " " + (r.success ? "✓ " : "✗ ") + "[" + r.origin + "] ",
      ...r.calls.flatMap((c, i) => [i ? " → " : "", apiLink(c.function, "graph"), c.ok ? "" : " (failed)"]))));
    if (!name) {
      name = summary.heaviest.length ? summary.heaviest[0].from : "";
      if (!name) return;
    }
    $("graph-api").value = name;
    const n = await api("/v1/graph/apis/" + encodeURIComponent(name) + "?limit=25");
    $("graph-node").replaceChildren(el("b", {}, n.function), " α " + fmt(n.alpha, 2) + ", " + n.online_calls +
      " calls online (" + n.online_successes + " ok), " + n.successors_total + " successors, " + n.predecessors_total +
      " predecessors ", apiLink(n.function));
    const nodes = [{ data: { id: n.function, function: n.function, label: n.function + "\nα " + fmt(n.alpha, 2) },
      classes: "center" }];
    const edges = [];
    const seen = new Set([n.function]);
    const add = (l) => {
      if (seen.has(l.function)) return;
      seen.add(l.function);
      nodes.push({ data: { id: l.function, function: l.function, label: l.function + "\nα " + fmt(l.alpha, 2) } });
    };
    n.successors.forEach((l) => { add(l); edges.push({ data: { id: "s" + l.function, source: n.function,
      target: l.function, label: "w " + fmt(l.w, 2) }, classes: l.online ? "taken" : "" }); });
    n.predecessors.forEach((l) => { add(l); edges.push({ data: { id: "p" + l.function, source: l.function,
      target: n.function, label: "w " + fmt(l.w, 2) }, classes: l.online ? "taken" : "" }); });
    draw("graph-canvas", nodes, edges, { name: "concentric", minNodeSpacing: 60,
      concentric: (node) => (node.hasClass("center") ? 2 : 1) }, (f) => {
      if (f && f !== "Finish") location.hash = "#graph/" + encodeURIComponent(f);
    });
    graphView = n.function;
  } catch (e) {
    showError(e.message);
  }
}

// ---- Traces --------------------------------------------------------------

async function loadTraces(id) {
  try {
    const list = await api("/v1/traces?limit=50" + ($("traces-all").checked ? "&all=true" : ""));
    showError("");
    fill($("trace-list").tBodies[0], list.data.map((t) => el("tr", {},
      el("td", {}, el("a", { href: "#traces/" + encodeURIComponent(t.id) }, new Date(t.at_unix_ms).toLocaleTimeString())),
      el("td", {}, t.status || t.mode), el("td", {}, t.task), el("td", {}, t.subtasks), el("td", {}, t.calls),
      el("td", {}, fmt(t.elapsed_ms, 0)))));
    if (id) showTrace(await api("/v1/traces/" + encodeURIComponent(id)));
  } catch (e) {
    showError(e.message);
  }
}

function json(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

// One run as a timeline: sub-tasks, then each decision at its time, then
// the steps with their arguments, repairs, outcomes and responses.
function showTrace(t) {
  if (t.kept) return showDecision(t);
  const trace = t.trace || t;
  const total = Math.max(1, trace.elapsed_ms || 1);
  const parts = [el("h2", {}, "Run " + (t.trace_id || ""), " — " + trace.status),
    el("p", { class: "answer" }, trace.answer),
    el("p", {}, trace.model_requests + " model requests, " + (trace.usage ? trace.usage.total_tokens : 0) +
      " tokens, " + fmt(trace.elapsed_ms, 0) + " ms")];
  (trace.subtasks || []).forEach((s, i) => {
    const run = s.run || { trace: [], steps: [] };
    parts.push(el("h3", {}, "Sub-task " + (i + 1) + " (wave " + s.wave + "): ", s.task));
    const moves = el("ol", { class: "timeline" });
    (run.trace || []).forEach((ev) => {
      const bar = el("span", { class: "bar" });
      bar.style.width = Math.max(2, Math.round(200 * ev.at_ms / total)) + "px";
      moves.append(el("li", { class: "move " + ev.move }, bar, " " + fmt(ev.at_ms, 1) + " ms ", el("b", {}, ev.move),
        ev.function ? " " + ev.function : "", ": " + ev.reason, " — candidates: " +
        ev.candidates.map((c) => c.function + " " + fmt(c.score, 2)).join(", ")));
    });
    parts.push(moves);
    (s.calls || []).forEach((c) => parts.push(el("div", { class: "call" }, el("b", {}, c.function || ""), json(c))));
    if (run.steps && run.steps.length) {
      parts.push(el("h4", {}, "Steps"));
      run.steps.forEach((step) => parts.push(el("div", { class: "step" },
        el("b", {}, step.function), " — " + step.reason + "; completed: " + (step.completed.join(", ") || "none") +
        "; repairs: " + step.repairs, json({ arguments: step.arguments, outcome: step.outcome, problems: step.problems }))));
    }
  });
  $("trace-detail").replaceChildren(...parts);
}

// A route or plan decision: what was asked, which tools were kept of how many.
function showDecision(d) {
  const parts = [el("h2", {}, (d.mode === "plan" ? "Plan" : "Route") + " decision " + (d.trace_id || "")),
    el("p", { class: "answer" }, d.request),
    el("p", {}, "kept " + d.tools_offered + " of " + d.tools_total + " tools; " + d.repairs + " repairs"),
    el("ol", { class: "kept" }, ...d.kept.map((name) => el("li", {}, name)))];
  if (d.plan) parts.push(el("h3", {}, "Plan"), json(d.plan));
  $("trace-detail").replaceChildren(...parts);
}

// ---- APIs ----------------------------------------------------------------

async function showApi(name) {
  if (!name) return;
  $("api-name").value = name;
  try {
    const a = await api("/v1/apis/" + encodeURIComponent(name));
    showError("");
    const recent = a.calls.recent.map((c) => el("tr", {}, el("td", {}, new Date(c.at_unix_ms).toLocaleTimeString()),
      el("td", {}, c.outcome), el("td", {}, c.retries), el("td", {}, fmt(c.ms, 1))));
    const table = el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "when"), el("th", {}, "outcome"),
      el("th", {}, "retries"), el("th", {}, "ms"))), el("tbody", {}, ...recent));
    $("api-detail").replaceChildren(
      el("h2", {}, a.function), el("p", { class: "description" }, a.description),
      el("p", {}, a.tool + " · " + a.category + " · " + a.method + " ", a.url || "", " ", graphLink(a.function)),
      el("h3", {}, "Limits"), json(a.limits),
      el("h3", {}, "Calls"), json(a.calls.outcomes), table,
      el("h3", {}, "Definition (what a model sees)"), json(a.definition));
  } catch (e) {
    showError(e.message);
  }
}

// ---- Navigation ----------------------------------------------------------

function route() {
  const [view, ...rest] = (location.hash.slice(1) || "overview").split("/");
  const arg = rest.length ? decodeURIComponent(rest.join("/")) : "";
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.id === "nav-" + view);
  clearInterval(overviewTimer);
  if (view === "overview") {
    loadOverview();
    overviewTimer = setInterval(loadOverview, 5000);
  } else if (view === "graph") {
    showGraph(arg);
  } else if (view === "traces") {
    loadTraces(arg);
  } else if (view === "apis") {
    showApi(arg);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key").value = sessionStorage.getItem("toolrouter-key") || "";
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("toolrouter-key", $("key").value.trim());
    route();
  });
  $("search-form").addEventListener("submit", search);
  $("plan-button").addEventListener("click", plan);
  $("graph-form").addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = "#graph/" + encodeURIComponent($("graph-api").value.trim());
  });
  $("api-form").addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = "#apis/" + encodeURIComponent($("api-name").value.trim());
  });
  $("traces-all").addEventListener("change", () => loadTraces());
  window.addEventListener("hashchange", route);
  route();
});
