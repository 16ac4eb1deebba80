// The vectorlog web console: reads /console/api/* with the server's token (kept in this tab's
// sessionStorage) and renders each page with DOM nodes. Every value is rendered as a text
// node (never innerHTML), so a name, description, value or dead letter holding markup is
// shown as text, never run.
"use strict";

const TOKEN_KEY = "vectorlog-console-token";
const PAGE_SIZE = 20;
const main = () => document.getElementById("main");

// -- DOM ----------------------------------------------------------------------------------
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props || {});
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function show(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function table(id, headers, rows) {
  const head = el("tr", {}, headers.map((h) => el("th", {}, h)));
  const body = rows.map((cells) =>
    el("tr", {}, cells.map((c) => el("td", { className: typeof c === "number" ? "num" : "" }, show(c)))));
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, body));
}

function kbytes(n) {
  return n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`;
}

// -- the API ------------------------------------------------------------------------------
class Unauthorized extends Error {}

async function api(path, init) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = Object.assign({}, (init && init.headers) || {});
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(`/console/api/${path}`, Object.assign({}, init, { headers }));
  if (response.status === 401) throw new Unauthorized("the server needs its token");
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

// -- pages --------------------------------------------------------------------------------
async function collectionsPage() {
  const collections = await api("collections");
  const rows = collections.map((c) =>
    [c.name, c.id, c.rows, c.shards, c.partitions.join(", "), c.consistency_level, c.description]);
  const parts = [el("h1", {}, "Collections"),
    table("collections-table", ["name", "id", "rows", "shards", "partitions", "consistency", "description"], rows)];
  for (const c of collections) {
    parts.push(el("h2", {}, `Collection ${c.name}`));
    parts.push(table(`schema-${c.name}`, ["field", "type", "primary", "params", "description"],
      c.fields.map((f) => [f.name, f.type, f.is_primary ? "yes" : "", f.params, f.description])));
    parts.push(c.indexes.length === 0 ? el("p", { className: "muted" }, "no index")
      : table(`indexes-${c.name}`, ["index", "field", "type", "metric", "indexed rows", "total rows", "state"],
        c.indexes.map((i) => [i.index_name, i.field_name, i.index_type, i.metric_type,
          i.indexed_rows, i.total_rows, i.state])));
  }
  return parts;
}

async function segmentsPage(params) {
  const names = (await api("collections")).map((c) => c.name);
  const chosen = params.get("collection") || names[0];
  const picker = el("select", { id: "segments-collection" },
    names.map((n) => el("option", { value: n, selected: n === chosen }, n)));
  picker.addEventListener("change", () => { location.hash = `segments?collection=${encodeURIComponent(picker.value)}`; });
  const parts = [el("h1", {}, "Segments"), el("label", {}, "Collection ", picker)];
  if (!chosen) return parts.concat(el("p", { className: "muted" }, "no collection"));
  const segments = await api(`segments?collection=${encodeURIComponent(chosen)}`);
  parts.push(table("segments-table", ["segment", "partition", "channel", "state", "rows", "max rows",
    "insert binlogs", "delta binlogs", "stats binlogs"],
  segments.map((s) => [s.segment_id, s.partition_id, s.insert_channel, s.state, s.num_rows,
    s.max_row_num, kbytes(s.binlog_bytes.insert), kbytes(s.binlog_bytes.delta), kbytes(s.binlog_bytes.stats)])));
  return parts;
}

async function consumersPage() {
  const rows = await api("consumers");
  return [el("h1", {}, "Consumers"),
    rows.length === 0 ? el("p", { className: "muted" }, "no consumer runs in this process")
      : table("consumers-table", ["processor", "topic", "partition", "position", "end", "lag"],
        rows.map((r) => [r.processor, r.topic, r.partition, r.position, r.end, r.lag]))];
}

async function deadLettersPage(params) {
  const offset = Math.max(0, Number(params.get("offset")) || 0);
  const page = await api(`dead-letters?offset=${offset}&limit=${PAGE_SIZE}`);
  const go = (to) => () => { location.hash = `dead-letters?offset=${to}`; };
  const prev = el("button", { id: "dead-letters-prev", type: "button", disabled: offset === 0 }, "Newer");
  const next = el("button", { id: "dead-letters-next", type: "button",
    disabled: offset + PAGE_SIZE >= page.total }, "Older");
  prev.addEventListener("click", go(Math.max(0, offset - PAGE_SIZE)));
  next.addEventListener("click", go(offset + PAGE_SIZE));
  const last = Math.min(page.total, offset + page.letters.length);
  return [el("h1", {}, "Dead letters"),
    el("p", { id: "dead-letters-count" }, `${page.total} dead letters; showing ${page.total ? offset + 1 : 0}-${last}, newest first`),
    table("dead-letters-table", ["reason", "processor", "topic", "partition", "offset", "bytes", "preview"],
      page.letters.map((d) => [d.reason, d.processor, d.topic, d.partition, d.offset, d.bytes,
        d.preview === null ? "(binary)" : d.preview])),
    el("p", {}, prev, " ", next)];
}

async function searchPage() {
  const names = (await api("collections")).map((c) => c.name);
  const form = el("form", { id: "search-form" },
    el("label", {}, "Collection ", el("select", { id: "search-collection" }, names.map((n) => el("option", { value: n }, n)))),
    el("label", {}, "Filter ", el("input", { id: "search-filter", type: "text", placeholder: "e.g. id > 10" })),
    el("label", {}, "Top-k ", el("input", { id: "search-limit", type: "number", value: "10", min: "1" })),
    el("label", {}, "Vector (JSON array; empty for a query) ", el("textarea", { id: "search-vector" })),
    el("button", { type: "submit", id: "search-run" }, "Run"));
  const out = el("div", { id: "search-results" });
  form.addEventListener("submit", (event) => { event.preventDefault(); runSearch(out); });
  return [el("h1", {}, "Search"), form, out];
}

async function runSearch(out) {
  const body = {
    collection: document.getElementById("search-collection").value,
    filter: document.getElementById("search-filter").value,
    limit: Number(document.getElementById("search-limit").value),
    vector: document.getElementById("search-vector").value,
  };
  out.replaceChildren(el("p", { className: "muted" }, "running..."));
  try {
    const result = await api("search", { method: "POST", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" } });
    out.replaceChildren(resultTable(result));
  } catch (error) {
    if (error instanceof Unauthorized) return login();
    out.replaceChildren(el("p", { className: "error", id: "search-error" }, error.message));
  }
}

function resultTable(result) {
  if (result.rows.length === 0) return el("p", { id: "search-empty" }, "no match");
  if (result.kind === "query") {
    const keys = Object.keys(result.rows[0]);
    return table("search-table", keys, result.rows.map((r) => keys.map((k) => r[k])));
  }
  const keys = Object.keys(result.rows[0].entity || {});
  return table("search-table", ["id", "distance", ...keys],
    result.rows.map((h) => [h.id, h.distance, ...keys.map((k) => h.entity[k])]));
}

async function healthPage() {
  const h = await api("health");
  return [el("h1", {}, "Health"),
    table("health-table", ["", ""], [["status", h.status], ["version", h.version], ["backend", h.backend],
      ["uptime (s)", h.uptime_s], ["collections", h.collections], ["dead letters", h.dead_letters]]),
    el("h2", {}, "Log end offsets"),
    table("log-ends-table", ["topic", "partition", "end"], h.log_ends.map((e) => [e.topic, e.partition, e.end]))];
}

const PAGES = { collections: collectionsPage, segments: segmentsPage, consumers: consumersPage,
  "dead-letters": deadLettersPage, search: searchPage, health: healthPage };

// -- routing and the token gate ----------------------------------------------------------
async function render() {
  const [name, query] = (location.hash.slice(1) || "collections").split("?");
  const page = PAGES[name] || collectionsPage;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.dataset.page === name);
  try {
    const parts = await page(new URLSearchParams(query || ""));
    document.getElementById("login").hidden = true;
    document.getElementById("nav").hidden = false;
    main().replaceChildren(...parts);
    main().dataset.page = name;
  } catch (error) {
    if (error instanceof Unauthorized) return login();
    main().replaceChildren(el("p", { className: "error", id: "page-error" }, error.message));
  }
}

function login(message) {
  main().replaceChildren();
  document.getElementById("nav").hidden = true;
  document.getElementById("login").hidden = false;
  const wrong = sessionStorage.getItem(TOKEN_KEY) !== null;
  document.getElementById("login-error").textContent = message || (wrong ? "that token was refused" : "");
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value);
    render();
  });
  document.getElementById("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    login("signed out");
  });
  window.addEventListener("hashchange", render);
  render();
});
