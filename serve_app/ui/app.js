// Strata memory inspector: vanilla JavaScript over the JSON API (no framework, no CDN).
// Everything the server sends is rendered with textContent, never as HTML.
"use strict";

const KEY_STORAGE = "strata.apiKey";
const USER_STORAGE = "strata.user";
const LAYERS = [["fact", "Facts"], ["episode", "Episodes"], ["procedure", "Procedures"]];
const $ = (id) => document.getElementById(id);

const state = { user: "", view: "memories", pendingDelete: null, editing: null,
  entities: [], entityEditing: null, entityAction: null };

// -- API ----------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, body) {
    super(`${status} ${body.error || "error"}: ${body.detail || ""}`);
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY_STORAGE) || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = {};
  try { data = await resp.json(); } catch (_) { data = { error: "bad_response" }; }
  if (resp.status === 401) { logout("Your key was refused: " + (data.detail || "")); }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

const userPath = (suffix) => `/v1/users/${encodeURIComponent(state.user)}${suffix}`;

// -- small DOM helpers -----------------------------------------------------------------------
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows));
}

const badge = (status) => el("span", { class: `badge ${status}`, text: status });
const fmtTime = (t) => (t ? new Date(t).toLocaleString() : "—");
const fmtNum = (n, d = 2) => (n === null || n === undefined ? "—" : Number(n).toFixed(d));

function say(message, isError = false) {
  const line = $("status-line");
  line.textContent = message;
  line.classList.toggle("error", isError);
}

function provenance(p) {
  if (!p || (!p.session_id && !(p.turn_ids || []).length)) return el("span", { text: "—" });
  const turns = (p.turn_ids || []).join(", ");
  return el("span", { class: "prov" },
    `session ${p.session_id || "—"}`, turns ? el("br") : null, turns ? `turns ${turns}` : null);
}

// -- login ----------------------------------------------------------------------------------
async function login(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
  try {
    const who = await api("GET", "/v1/whoami");
    $("who-tenant").textContent = who.tenant;
    $("who-role").textContent = who.agent ? `${who.role} ${who.agent}` : who.role;
    $("login-view").hidden = true;
    $("app").hidden = false;
    $("whoami").hidden = false;
    $("login-error").textContent = "";
    await loadUsers();
    const remembered = sessionStorage.getItem(USER_STORAGE);
    if (remembered) await pickUser(remembered);
    show(state.view);
  } catch (err) {
    sessionStorage.removeItem(KEY_STORAGE);
    $("login-error").textContent = err.status === 401 ? "That key was refused." : String(err);
  }
}

function logout(message = "") {
  sessionStorage.removeItem(KEY_STORAGE);
  sessionStorage.removeItem(USER_STORAGE);
  state.user = "";
  $("app").hidden = true;
  $("whoami").hidden = true;
  $("login-view").hidden = false;
  $("api-key").value = "";
  $("login-error").textContent = message;
}

// -- users ----------------------------------------------------------------------------------
async function loadUsers() {
  const { users } = await api("GET", "/v1/users");
  const select = $("user-select");
  select.replaceChildren(el("option", { value: "", text: `— pick a user (${users.length}) —` }),
    ...users.map((u) => el("option", { value: u, text: u })));
  if (state.user) select.value = state.user;
}

async function pickUser(user) {
  state.user = user.trim();
  sessionStorage.setItem(USER_STORAGE, state.user);
  $("user-select").value = state.user;
  $("user-input").value = "";
  if (state.view === "history") show("memories");
  else await refresh();
}

// -- views ----------------------------------------------------------------------------------
function show(view) {
  state.view = view;
  for (const v of ["memories", "history", "entities", "recall", "knowledge", "queues"]) {
    $(`view-${v}`).hidden = v !== view;
  }
  for (const tab of document.querySelectorAll(".tab")) {
    tab.classList.toggle("active", tab.dataset.view === view ||
      (view === "history" && tab.dataset.view === "memories"));
  }
  refresh();
}

async function refresh() {
  try {
    if (state.view === "memories") await loadMemories();
    else if (state.view === "entities") await loadEntities();
    else if (state.view === "knowledge") await loadKnowledge();
    else if (state.view === "queues") await loadQueues();
  } catch (err) {
    say(String(err), true);
  }
}

// -- memories -------------------------------------------------------------------------------
async function loadMemories() {
  const box = $("memories");
  if (!state.user) {
    box.replaceChildren(el("p", { class: "muted", text: "Pick a user to see their memories." }));
    return;
  }
  const params = new URLSearchParams({ limit: "1000" });
  for (const [name, id] of [["kind", "filter-kind"], ["status", "filter-status"],
    ["q", "filter-q"], ["context", "filter-context"], ["agent", "filter-agent"]]) {
    if ($(id).value) params.set(name, $(id).value);
  }
  const { memories } = await api("GET", userPath(`/memories?${params}`));
  const sections = [];
  for (const [kind, layer] of LAYERS) {
    const mine = memories.filter((m) => m.kind === kind);
    if ($("filter-kind").value && $("filter-kind").value !== kind) continue;
    sections.push(el("h3", { text: `${layer} (${mine.length})` }));
    if (!mine.length) {
      sections.push(el("p", { class: "muted", text: `No ${layer.toLowerCase()}.` }));
      continue;
    }
    sections.push(table(
      ["memory", "status", "confidence", "source", "context", "visibility", "last access",
        "accesses", "updated", "provenance", ""],
      mine.map(memoryRow)));
  }
  box.replaceChildren(...sections);
  say(`${memories.length} ${memories.length === 1 ? "memory" : "memories"} of ${state.user}`);
}

function memoryRow(m) {
  const what = el("td", {},
    m.key ? el("div", {}, el("code", { text: m.key }), " = ", el("b", { text: m.value ?? "" }))
      : null,
    el("div", { class: "text", text: m.text }),
    el("div", { class: "prov", text: m.id }));
  return el("tr", { "data-memory-id": m.id, "data-status": m.status },
    what,
    el("td", {}, badge(m.status)),
    el("td", { class: "num", text: fmtNum(m.confidence) }),
    el("td", { text: m.source }),
    el("td", { class: "context", text: m.context || "—" }),
    el("td", { class: "visibility" }, visibilityOf(m)),
    el("td", { text: fmtTime(m.last_access_at) }),
    el("td", { class: "num", text: String(m.access_count) }),
    el("td", { text: fmtTime(m.updated_at) }),
    el("td", {}, provenance(m.provenance)),
    el("td", {}, el("div", { class: "actions" },
      el("button", { type: "button", class: "small secondary", text: "History",
        onclick: () => openHistory(m) }),
      el("button", { type: "button", class: "small secondary", text: "Edit",
        onclick: () => openEdit(m) }),
      el("button", { type: "button", class: "small danger", text: "Delete",
        onclick: () => askDelete(m) }))));
}

async function openHistory(m) {
  show("history");
  $("history-id").textContent = m.key || m.id;
  const { versions } = await api("GET", userPath(`/memories/${encodeURIComponent(m.id)}/history`));
  $("history").replaceChildren(table(
    ["version", "value / text", "status", "confidence", "source", "valid from", "valid to",
      "superseded by", "provenance"],
    versions.map((v, i) => el("tr", { "data-memory-id": v.id },
      el("td", { class: "num", text: String(i + 1) }),
      el("td", {}, v.value ? el("b", { text: v.value }) : null, el("div", { text: v.text })),
      el("td", {}, badge(v.status)),
      el("td", { class: "num", text: fmtNum(v.confidence) }),
      el("td", { text: v.source }),
      el("td", { text: fmtTime(v.event_time || v.created_at) }),
      el("td", { text: fmtTime(v.valid_to) }),
      el("td", { class: "prov", text: v.superseded_by || "—" }),
      el("td", {}, provenance(v.provenance))))));
  say(`${versions.length} version(s)`);
}

function visibilityOf(m) {
  const who = m.visibility === "private" ? "private"
    : m.visibility === "agents" ? `agents: ${[m.agent, ...(m.shared_with || [])].join(", ")}`
      : "shared";
  return el("span", { class: `vis vis-${m.visibility || "shared"}`,
    title: m.agent ? `learned by ${m.agent}` : "learned by no agent",
    text: m.agent && m.visibility !== "agents" ? `${who} · ${m.agent}` : who });
}

function openEdit(m) {
  state.editing = m;
  $("edit-note").textContent = `${m.kind} ${m.id}`;
  $("edit-text").value = m.text;
  $("edit-value-row").hidden = !(m.kind === "fact" && m.key);
  $("edit-value").value = m.value ?? "";
  $("edit-confidence").value = fmtNum(m.confidence);  // stored as float32: 0.8999…
  $("edit-status").value = "";
  $("edit-context").value = m.context ?? "";
  $("edit-visibility").value = m.visibility || "shared";
  $("edit-shared-with").value = (m.shared_with || []).join(", ");
  $("edit-error").textContent = "";
  $("edit-dialog").showModal();
}

async function saveEdit(event) {
  event.preventDefault();
  const m = state.editing;
  const patch = {};
  if ($("edit-text").value.trim() && $("edit-text").value !== m.text) {
    patch.text = $("edit-text").value.trim();
  }
  if (!$("edit-value-row").hidden && $("edit-value").value.trim() &&
    $("edit-value").value !== (m.value ?? "")) {
    patch.value = $("edit-value").value.trim();
    // the text follows the new value unless it was edited by hand
    if (!patch.text) {
      patch.text = m.value && m.text.includes(m.value)
        ? m.text.replace(m.value, patch.value) : `${m.key}: ${patch.value}`;
    }
  }
  const conf = parseFloat($("edit-confidence").value);
  if (!Number.isNaN(conf) && conf.toFixed(2) !== fmtNum(m.confidence)) patch.confidence = conf;
  if ($("edit-status").value) patch.status = $("edit-status").value;
  const context = $("edit-context").value.trim();
  if (context !== (m.context ?? "")) patch.context = context;  // "": the user in general
  if ($("edit-visibility").value !== (m.visibility || "shared")) {
    patch.visibility = $("edit-visibility").value;
  }
  const sharedWith = $("edit-shared-with").value.split(",").map((a) => a.trim())
    .filter(Boolean);
  if (sharedWith.join(",") !== (m.shared_with || []).join(",")) patch.shared_with = sharedWith;
  if (!Object.keys(patch).length) { $("edit-dialog").close(); return; }
  try {
    const { memory } = await api("PATCH", userPath(`/memories/${encodeURIComponent(m.id)}`),
      patch);
    $("edit-dialog").close();
    say(`Saved: ${memory.id}${memory.id !== m.id ? " (a new version)" : ""}`);
    await loadMemories();
  } catch (err) {
    $("edit-error").textContent = String(err);
  }
}

function askDelete(m) {
  state.pendingDelete = m;
  $("confirm-text").textContent = `“${m.text}” (${m.kind}, ${m.id})`;
  $("confirm-dialog").returnValue = "";
  $("confirm-dialog").showModal();
}

async function confirmDelete() {
  const m = state.pendingDelete;
  state.pendingDelete = null;
  if (!m || $("confirm-dialog").returnValue !== "delete") return;
  try {
    await api("DELETE", userPath(`/memories/${encodeURIComponent(m.id)}`));
    say(`Deleted ${m.id}`);
    await loadMemories();
  } catch (err) {
    say(String(err), true);
  }
}

// -- entities -------------------------------------------------------------------------------
function entityParams() {
  const params = new URLSearchParams({ limit: "1000" });
  if ($("entity-agent").value.trim()) params.set("agent", $("entity-agent").value.trim());
  return params;
}

async function loadEntities() {
  const box = $("entities");
  $("entity-detail").replaceChildren();
  if (!state.user) {
    box.replaceChildren(el("p", { class: "muted", text: "Pick a user to see their entities." }));
    return;
  }
  const params = entityParams();
  if ($("entity-type").value) params.set("type", $("entity-type").value);
  if ($("entity-q").value.trim()) params.set("q", $("entity-q").value.trim());
  const listed = await api("GET", userPath(`/entities?${params}`));
  state.entities = listed.entities;
  box.replaceChildren(listed.entities.length ? table(
    ["entity", "type", "mentions", "sessions", "links", "last mentioned", ""],
    listed.entities.map(entityRow))
    : el("p", { class: "muted", text: "No entities in the memories you may see." }));
  say(`${listed.entities.length} of ${listed.total} entities of ${state.user} ` +
    `(from ${listed.memories_read} memories)`);
}

function linksOf(e) {
  const parts = [];
  if (e.within.length) parts.push(`in ${e.within.join(" → ")}`);
  for (const link of e.links) {
    if (link.kind === "in_place") continue;  // said by "in …" above
    parts.push(`${link.kind.replace("_", " ")}: ${link.name}`);
  }
  return parts.join(" · ") || "—";
}

function entityRow(e) {
  return el("tr", { "data-entity-id": e.id, "data-entity-name": e.name },
    el("td", {},
      el("button", { type: "button", class: "link entity-open", text: e.name,
        onclick: () => openEntity(e.id) }),
      e.aliases.length ? el("div", { class: "prov", text: `also ${e.aliases.join(", ")}` })
        : null),
    el("td", {}, el("span", { class: "badge", text: e.type })),
    el("td", { class: "num mentions", text: String(e.mentions) }),
    el("td", { class: "num", text: String(e.sessions) }),
    el("td", { class: "links", text: linksOf(e) }),
    el("td", { text: fmtTime(e.last_mentioned_at) }),
    el("td", {}, el("div", { class: "actions" },
      el("button", { type: "button", class: "small secondary entity-edit", text: "Edit",
        onclick: () => openEntityEdit(e) }),
      el("button", { type: "button", class: "small danger entity-delete", text: "Delete",
        onclick: () => askEntity(e, "delete") }),
      el("button", { type: "button", class: "small danger entity-forget", text: "Forget",
        onclick: () => askEntity(e, "forget") }))));
}

async function openEntity(id) {
  const d = await api("GET", userPath(`/entities/${encodeURIComponent(id)}?${entityParams()}`));
  const facts = [["name", d.name], ["type", d.type], ["also known as", d.aliases.join(", ")],
    ["in", d.within.join(" → ")], ["links", linksOf({ ...d, within: [] })],
    ["contains", d.contains.map((c) => c.name).join(", ")],
    ["mentions", `${d.mentions} memories in ${d.sessions} session(s)`]];
  $("entity-detail").replaceChildren(
    el("h3", { text: `${d.name} — what the memories say, newest first` }),
    el("dl", { class: "kv card", id: "entity-summary" },
      ...facts.flatMap(([k, v]) => [el("dt", { text: k }),
        el("dd", { "data-field": k, text: v || "—" })])),
    table(["when", "memory", "kind", "via", "provenance"],
      d.mention_list.map((m) => el("tr", { "data-memory-id": m.memory_id },
        el("td", { text: fmtTime(m.at) }),
        el("td", {}, el("div", { text: m.text }), el("div", { class: "prov", text: m.memory_id })),
        el("td", { text: m.kind }),
        el("td", { text: m.via ? (d.contains.find((c) => c.target === m.via) || {}).name || m.via
          : "—" }),
        el("td", {}, provenance({ session_id: m.session_id, turn_ids: m.turn_ids }))))));
  say(`${d.name}: ${d.mention_list.length} memories`);
}

function openEntityEdit(e) {
  state.entityEditing = e;
  $("entity-note").textContent = `${e.type} ${e.key}`;
  $("entity-name").value = e.name;
  $("entity-retype").value = e.type;
  $("entity-merge").replaceChildren(el("option", { value: "", text: "— don't merge —" }),
    ...state.entities.filter((o) => o.id !== e.id)
      .map((o) => el("option", { value: o.id, text: `${o.name} (${o.type})` })));
  $("entity-error").textContent = "";
  $("entity-dialog").showModal();
}

async function saveEntity(event) {
  event.preventDefault();
  const e = state.entityEditing;
  const patch = {};
  const name = $("entity-name").value.trim();
  if (name && name !== e.name) patch.name = name;
  if ($("entity-retype").value !== e.type) patch.type = $("entity-retype").value;
  if ($("entity-merge").value) patch.merge_into = $("entity-merge").value;
  if (!Object.keys(patch).length) { $("entity-dialog").close(); return; }
  try {
    const saved = await api("PATCH",
      userPath(`/entities/${encodeURIComponent(e.id)}?${entityParams()}`), patch);
    $("entity-dialog").close();
    await loadEntities();
    say(`Saved: ${saved.name}`);
  } catch (err) {
    $("entity-error").textContent = String(err);
  }
}

function askEntity(e, action) {
  state.entityAction = { entity: e, action };
  $("entity-confirm-title").textContent = action === "delete"
    ? `Delete the entity “${e.name}”?` : `Forget everything about “${e.name}”?`;
  $("entity-confirm-text").textContent = `${e.type}, named by ${e.mentions} memories`;
  $("entity-confirm-note").textContent = action === "delete"
    ? "It leaves this entity view; the memories that name it stay."
    : "Every memory you see that names it is hidden now and deleted when the grace period " +
      "ends; until then it can be undone from the user's forgets.";
  $("entity-confirm-ok").textContent = action === "delete" ? "Delete" : "Forget";
  $("entity-confirm-dialog").returnValue = "";
  $("entity-confirm-dialog").showModal();
}

async function confirmEntity() {
  const pending = state.entityAction;
  state.entityAction = null;
  if (!pending || $("entity-confirm-dialog").returnValue !== "ok") return;
  const { entity, action } = pending;
  const path = userPath(`/entities/${encodeURIComponent(entity.id)}` +
    `${action === "forget" ? "/forget" : ""}?${entityParams()}`);
  try {
    const answer = await api(action === "delete" ? "DELETE" : "POST", path);
    await loadEntities();
    say(action === "delete" ? `Deleted the entity ${entity.name}`
      : `Forgot ${answer.hidden} memories naming ${entity.name} (undo: forget ${answer.forget_id})`);
  } catch (err) {
    say(String(err), true);
  }
}

// -- recall playground ----------------------------------------------------------------------
async function runRecall(event) {
  event.preventDefault();
  if (!state.user) { say("Pick a user first.", true); return; }
  const body = {
    user_id: state.user, query: $("recall-query").value, debug: true,
    budget_tokens: Number($("recall-budget").value) || 500,
    top_k: Number($("recall-topk").value) || 10,
    include_cold: $("recall-cold").checked,
  };
  if ($("recall-session").value.trim()) body.session_id = $("recall-session").value.trim();
  const layers = [...document.querySelectorAll("#recall-layers input:checked")]
    .map((i) => i.value);
  if (layers.length) body.layers = layers;
  const box = $("recall-result");
  try {
    const r = await api("POST", "/v1/recall", body);
    box.replaceChildren(...renderRecall(r));
    say(`route ${r.route}: ${r.items.length} item(s) in the context`);
  } catch (err) {
    box.replaceChildren();
    say(String(err), true);
  }
}

function renderRecall(r) {
  const dbg = r.debug || {};
  const included = new Set(r.items.map((i) => i.id));
  const facts = [["route", r.route], ["why", dbg.route_reason], ["layers", r.layers.join(", ")],
    ["recipe", dbg.recipe], ["threshold", dbg.threshold], ["relaxed", dbg.relaxed],
    ["fallback", dbg.fallback], ["degraded", r.degraded],
    ["context tokens", dbg.context_tokens],
    ["timings (ms)", Object.entries(r.timings_ms || {}).map(([k, v]) => `${k} ${v}`)
      .join(" · ")]];
  const summary = el("dl", { class: "kv card", id: "recall-summary" },
    ...facts.flatMap(([k, v]) => [el("dt", { text: k }),
      el("dd", { "data-field": k, text: v === undefined ? "—" : String(v) })]));
  const candidates = dbg.candidates || [];
  const partNames = [...new Set(candidates.flatMap((c) => Object.keys(c.parts || {})))];
  const candTable = table(
    ["in context", "layer", "text", "score", ...partNames],
    candidates.map((c) => el("tr", {
      class: included.has(c.id) ? "included" : "", "data-candidate-id": c.id },
    el("td", { text: included.has(c.id) ? "✓" : "" }),
    el("td", { text: c.layer }),
    el("td", {}, el("div", { text: c.text }), el("div", { class: "prov", text: c.id })),
    el("td", { class: "num", text: fmtNum(c.score, 4) }),
    ...partNames.map((p) => el("td", { class: "num parts",
      text: c.parts && p in c.parts ? fmtNum(c.parts[p], 3) : "" })))));
  candTable.id = "recall-candidates";
  const itemTable = table(["layer", "text", "score", "confidence", "source", "provenance"],
    r.items.map((i) => el("tr", { "data-item-id": i.id },
      el("td", { text: i.layer }),
      el("td", {}, el("div", { text: i.text }), el("div", { class: "prov", text: i.id })),
      el("td", { class: "num", text: fmtNum(i.score, 4) }),
      el("td", { class: "num", text: fmtNum(i.confidence) }),
      el("td", { text: i.source || "—" }),
      el("td", {}, provenance(i.provenance)))));
  return [summary,
    el("h3", { text: `Candidates (${candidates.length})` }), candTable,
    el("h3", { text: `In the context (${r.items.length}), with where each came from` }),
    itemTable,
    el("h3", { text: "Final context" }),
    el("pre", { class: "context", id: "recall-context", text: r.context || "(empty)" })];
}

// -- knowledge ------------------------------------------------------------------------------
async function loadKnowledge() {
  const { documents } = await api("GET", "/v1/knowledge/documents");
  $("knowledge").replaceChildren(
    el("h3", { text: `Documents (${documents.length})` }),
    documents.length ? table(
      ["document", "title", "latest version", "versions", "chunks by status", "updated",
        "embedding model"],
      documents.map((d) => el("tr", { "data-doc-id": d.doc_id },
        el("td", {}, el("button", { type: "button", class: "link", text: d.doc_id,
          onclick: () => openDocument(d.doc_id) })),
        el("td", { text: d.title }),
        el("td", { class: "num", text: String(d.latest_version) }),
        el("td", { text: d.versions.join(", ") }),
        el("td", {}, ...Object.entries(d.chunks).map(([s, n]) =>
          el("span", {}, badge(s), ` ${n} `))),
        el("td", { text: fmtTime(d.updated_at * 1000) }),
        el("td", { text: d.embed_models.join(", ") }))))
      : el("p", { class: "muted", text: "No documents in this tenant's knowledge base." }));
  say(`${documents.length} document(s)`);
}

async function openDocument(docId) {
  const doc = await api("GET", `/v1/knowledge/documents/${docId.split("/")
    .map(encodeURIComponent).join("/")}`);
  $("knowledge-doc").replaceChildren(
    el("h3", { text: `Chunks of ${doc.doc_id} (all versions)` }),
    table(["position", "version", "status", "text", "hash"],
      doc.chunks.map((c) => el("tr", {},
        el("td", { class: "num", text: String(c.position) }),
        el("td", { class: "num", text: String(c.version) }),
        el("td", {}, badge(c.status)),
        el("td", { text: c.text }),
        el("td", { class: "prov", text: (c.content_hash || "").slice(0, 12) })))));
}

// -- queues ---------------------------------------------------------------------------------
async function loadQueues() {
  const { tenant, queues } = await api("GET", "/v1/queues");
  const system = queues.some((q) => q.system);
  const rows = queues.map((q) => el("tr", { "data-queue": q.queue },
    el("td", {}, el("code", { text: q.queue })),
    el("td", { class: "num", text: String(q.backlog) }),
    el("td", { class: "num", text: fmtNum(q.lag_s, 1) }),
    el("td", { text: Object.entries(q.by_user).map(([u, n]) => `${u}: ${n}`).join(", ") || "—" }),
    el("td", { text: Object.entries(q.by_type).map(([t, n]) => `${t}: ${n}`).join(", ") || "—" }),
    ...(system ? [
      el("td", { class: "num", text: String(q.system.backlog) }),
      el("td", { class: "num", text: String(q.system.pending) }),
      el("td", { class: "num", text: fmtNum(q.system.lag_s, 1) })] : [])));
  $("queues").replaceChildren(
    el("p", { class: "muted", text: `Long-term write queues. Backlog = entries not yet ` +
      `acknowledged by an extractor; lag = age of the oldest. Tenant ${tenant}` +
      (system ? "; all tenants' totals are shown to admin keys (counts only)." : ".") }),
    table(["queue", "backlog (tenant)", "extraction lag s (tenant)", "by user", "by job type",
      ...(system ? ["backlog (all)", "in flight (all)", "lag s (all)"] : [])], rows));
  say(`queues at ${new Date().toLocaleTimeString()}`);
}

// -- wiring ---------------------------------------------------------------------------------
function wire() {
  $("login-form").addEventListener("submit", (e) => {
    e.preventDefault();
    login($("api-key").value.trim());
  });
  $("logout").addEventListener("click", () => logout());
  for (const tab of document.querySelectorAll(".tab")) {
    tab.addEventListener("click", () => show(tab.dataset.view));
  }
  $("user-select").addEventListener("change", (e) => {
    if (e.target.value) pickUser(e.target.value);
  });
  const typed = () => { if ($("user-input").value.trim()) pickUser($("user-input").value); };
  $("user-go").addEventListener("click", typed);
  $("user-input").addEventListener("keydown", (e) => { if (e.key === "Enter") typed(); });
  $("memory-filters").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  $("history-back").addEventListener("click", () => show("memories"));
  $("edit-form").addEventListener("submit", saveEdit);
  $("edit-cancel").addEventListener("click", () => $("edit-dialog").close());
  $("confirm-dialog").addEventListener("close", confirmDelete);
  $("entity-filters").addEventListener("submit", (e) => { e.preventDefault(); refresh(); });
  $("entity-form").addEventListener("submit", saveEntity);
  $("entity-cancel").addEventListener("click", () => $("entity-dialog").close());
  $("entity-confirm-dialog").addEventListener("close", confirmEntity);
  $("recall-form").addEventListener("submit", runRecall);
  $("knowledge-refresh").addEventListener("click", refresh);
  $("queues-refresh").addEventListener("click", refresh);
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (key) login(key);
}

document.addEventListener("DOMContentLoaded", wire);
