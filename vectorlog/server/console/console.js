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
    el("tr", {}, cells.map((c) => el("td", { className: typeof c === "number" ? "num" : "" },
      c instanceof Node ? c : show(c)))));
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
  const lives = await api(`segment-history?collection=${encodeURIComponent(chosen)}`);
  parts.push(el("h2", {}, "States over time"),
    el("p", { className: "muted" }, "from the coord topic's segment lifecycle events; Dropped segments included"),
    table("segment-history-table", ["segment", "origin", ...STATES, "rows", "sealed by"],
      lives.map((s) => [s.segment_id, s.origin, ...STATES.map((st) => (s.states[st] || {}).time || ""),
        s.rows, s.seal_reason])));
  return parts;
}

const STATES = ["Growing", "Sealed", "Flushing", "Flushed", "Dropped"];

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


// -- time travel: a collection as of any T ---------------------------------------------------
// Hybrid timestamps (physical ms << 18 | logical) exceed a JavaScript number: they travel as
// strings, and the slider's millisecond becomes the last hybrid ts of that millisecond.
function endOfMs(ms) {
  return ((BigInt(ms) << 18n) | 262143n).toString();
}

function msOf(ts) {
  return Number(BigInt(ts) >> 18n);
}

async function asOfPage(params) {
  const names = (await api("collections")).map((c) => c.name);
  const chosen = params.get("collection") || names[0];
  const go = (ts) => {
    location.hash = `as-of?collection=${encodeURIComponent(chosen)}&ts=${encodeURIComponent(ts)}`;
  };
  const picker = el("select", { id: "as-of-collection" },
    names.map((n) => el("option", { value: n, selected: n === chosen }, n)));
  picker.addEventListener("change", () => { location.hash = `as-of?collection=${encodeURIComponent(picker.value)}`; });
  const parts = [el("h1", {}, "Time travel"), el("label", {}, "Collection ", picker)];
  if (!chosen) return parts.concat(el("p", { className: "muted" }, "no collection"));
  const at = await api(`as-of?collection=${encodeURIComponent(chosen)}&ts=${encodeURIComponent(params.get("ts") || "")}`);
  const slider = el("input", { id: "as-of-slider", type: "range", min: String(msOf(at.first.ts)),
    max: String(msOf(at.last.ts)), step: "1", value: String(msOf(at.ts)) });
  slider.addEventListener("change", () => go(endOfMs(slider.value)));
  const typed = el("input", { id: "as-of-time", type: "text", value: at.time });
  const form = el("form", { id: "as-of-form" }, el("label", {}, "As of ", slider, " ", typed, " ",
    el("button", { type: "submit", id: "as-of-go" }, "Show")));
  form.addEventListener("submit", (event) => { event.preventDefault(); go(typed.value); });
  const moments = el("p", { id: "as-of-moments" }, "Moments: ", at.moments.map((m) => {
    const b = el("button", { type: "button", className: "moment", title: m.text }, `${m.type} ${m.time}`);
    b.addEventListener("click", () => go(m.ts));
    return b;
  }));
  parts.push(form, moments, el("h2", { id: "as-of-title" }, `${at.collection} as of ${at.time}`));
  if (!at.exists) return parts.concat(el("p", { id: "as-of-missing" }, `${at.collection} did not exist at ${at.time}`));
  parts.push(table("as-of-summary", ["", ""], [["id", at.id], ["rows", at.rows === undefined ? at.rows_error : at.rows],
    ["partitions", at.partitions.join(", ")], ["segments", at.segments.length]]));
  parts.push(el("h2", {}, "Schema"), table("as-of-schema", ["field", "type", "primary", "params", "description"],
    at.fields.map((f) => [f.name, f.type, f.is_primary ? "yes" : "", f.params, f.description])));
  parts.push(el("h2", {}, "Indexes"), at.indexes.length === 0 ? el("p", { id: "as-of-no-index", className: "muted" }, "no index")
    : table("as-of-indexes", ["index", "field", "type", "metric", "created"],
      at.indexes.map((i) => [i.index_name, i.field_name, i.index_type, i.metric_type, i.created])));
  parts.push(el("h2", {}, "Segments"), table("as-of-segments", ["segment", "partition", "channel", "state", "rows"],
    at.segments.map((s) => [s.segment_id, s.partition_id, s.channel, s.state, s.rows])));
  return parts;
}

// -- the event browser: the replay tool in the browser ----------------------------------------
const EVENT_KEYS = ["topic", "partition", "offset", "limit", "collection", "type", "from", "to"];

async function eventsPage(params) {
  const query = new URLSearchParams();
  for (const key of EVENT_KEYS) if (params.get(key)) query.set(key, params.get(key));
  const page = await api(`events?${query}`);
  const input = (key, value, type) => el("input", { id: `events-${key}`, type: type || "text", value: value ?? "" });
  const topic = el("select", { id: "events-topic" },
    ["dml", "ddl", "coord"].map((t) => el("option", { value: t, selected: t === page.topic }, t)));
  const type = el("select", { id: "events-type" }, el("option", { value: "" }, "(every type)"),
    page.types.map((t) => el("option", { value: t, selected: t === params.get("type") }, t)));
  const fields = { partition: input("partition", page.partition, "number"), offset: input("offset", page.offset, "number"),
    limit: input("limit", params.get("limit") || "20", "number"), collection: input("collection", params.get("collection")),
    from: input("from", params.get("from")), to: input("to", params.get("to")) };
  const form = el("form", { id: "events-form" },
    el("label", {}, "Topic ", topic, " partition ", fields.partition, ` of ${page.partitions}`, " from offset ", fields.offset,
      ` (kept: ${page.start}..${page.end - 1})`, " page size ", fields.limit),
    el("label", {}, "Collection ", fields.collection, " type ", type),
    el("label", {}, "Time from ", fields.from, " to ", fields.to, el("span", { className: "muted" }, " ISO-8601 (UTC) or a hybrid ts")),
    el("button", { type: "submit", id: "events-run" }, "Read"));
  const browse = (changes) => {
    const next = new URLSearchParams({ topic: topic.value, type: type.value });
    for (const [key, node] of Object.entries(fields)) next.set(key, node.value);
    for (const [key, value] of Object.entries(changes)) next.set(key, value);
    for (const key of [...next.keys()]) if (next.get(key) === "") next.delete(key);
    location.hash = `events?${next}`;
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); browse({}); });
  topic.addEventListener("change", () => { fields.partition.value = "0"; fields.offset.value = ""; });
  fields.partition.addEventListener("change", () => { fields.offset.value = ""; });
  const back = (params.get("back") || "").split(",").filter((x) => x !== "");
  const prev = el("button", { id: "events-prev", type: "button", disabled: back.length === 0 }, "Previous page");
  prev.addEventListener("click", () => browse({ offset: back[back.length - 1], back: back.slice(0, -1).join(",") }));
  const next = el("button", { id: "events-next", type: "button", disabled: page.at_end }, "Next page");
  next.addEventListener("click", () => browse({ offset: String(page.next_offset), back: [...back, page.offset].join(",") }));
  const parts = [el("h1", {}, "Events"), form,
    el("p", { id: "events-range" }, `${page.events.length} events among offsets ${page.offset}..${page.next_offset - 1}`
      + ` of ${page.topic} partition ${page.partition}${page.at_end ? " (the end)" : ""}`),
    table("events-table", ["offset", "time", "type", "collection", "vchannel", "preview"],
      page.events.map((e) => [e.offset, e.time, e.type, e.collection || (e.collection_id ? e.collection_id : ""),
        e.vchannel, el("pre", {}, e.preview)])),
    el("p", {}, prev, " ", next)];
  if (page.corrupt.length) {
    parts.push(el("h2", {}, "Records that do not decode"),
      table("events-corrupt", ["offset", "reason"], page.corrupt.map((c) => [c.offset, c.reason])));
  }
  return parts;
}

// -- jobs ----------------------------------------------------------------------------------
function progress(percent) {
  return el("span", {}, el("progress", { max: 100, value: percent }), ` ${percent} %`);
}

async function jobsPage() {
  const jobs = await api("jobs");
  const none = (id, what) => el("p", { id, className: "muted" }, what);
  return [el("h1", {}, "Jobs"),
    el("h2", {}, "Flushes"), jobs.flushes.length === 0 ? none("flushes-none", "no flush yet")
      : table("flushes-table", ["sealed at", "collection", "state", "progress", "segments", "flushed"],
        jobs.flushes.map((f) => [f.time, f.collection, f.state, progress(f.progress), f.segments, f.flushed])),
    el("h2", {}, "Compactions"), jobs.compactions.length === 0 ? none("compactions-none", "no compaction in this process")
      : table("compactions-table", ["job", "collection", "state", "progress", "plans", "merged", "rows dropped", "seconds", "failures"],
        jobs.compactions.map((c) => [c.job_id, c.collection, c.state, progress(c.progress), c.plans, c.merged,
          c.dropped_rows, c.elapsed_s, c.failures])),
    el("h2", {}, "Imports (bulk insert)"), jobs.imports.length === 0 ? none("imports-none", "no import in this process")
      : table("imports-table", ["task", "collection", "state", "progress", "files", "rows", "reason"],
        jobs.imports.map((i) => [i.task_id, i.collection_name, i.state, progress(i.progress), i.files, i.row_count, i.failed_reason])),
    el("h2", {}, "Index builds"), jobs.indexes.length === 0 ? none("indexes-none", "no index")
      : table("index-jobs-table", ["collection", "index", "field", "type", "state", "progress", "indexed rows", "total rows",
        "segment builds", "build ms", "last build"],
      jobs.indexes.map((i) => [i.collection, i.index_name, i.field_name, i.index_type, i.state, progress(i.progress),
        i.indexed_rows, i.total_rows, i.segments, i.build_ms, i.last_build]))];
}

const PAGES = { collections: collectionsPage, segments: segmentsPage, "as-of": asOfPage, events: eventsPage,
  jobs: jobsPage, consumers: consumersPage, "dead-letters": deadLettersPage, search: searchPage, health: healthPage };

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
