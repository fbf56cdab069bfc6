// brisk chat page: conversations in localStorage, answers streamed from
// POST /v1/chat/completions (server-sent events), the model list from /v1/models, the API key
// (when the server wants one) kept in the browser. No framework, no network beyond this server.
import { renderMarkdown } from "/webui/markdown.js";

const $ = (id) => document.getElementById(id);
const store = {
  get(key, fallback) {
    try { const v = localStorage.getItem(key); return v === null ? fallback : JSON.parse(v); } catch { return fallback; }
  },
  set(key, value) { localStorage.setItem(key, JSON.stringify(value)); },
};

const SAMPLER_FIELDS = ["temperature", "top_p", "top_k", "min_p", "max_tokens"];
let conversations = store.get("brisk.conversations", []);
let currentId = store.get("brisk.current", null);
let controller = null; // the AbortController of the answer being streamed

function apiKey() { return store.get("brisk.apiKey", ""); }
function headers() {
  const h = { "Content-Type": "application/json" };
  if (apiKey()) h.Authorization = `Bearer ${apiKey()}`;
  return h;
}

// Asks for the key (a 401 came back) and resolves once one is saved.
function askForKey() {
  return new Promise((resolve) => {
    const dialog = $("key-dialog");
    $("key-dialog-input").value = apiKey();
    dialog.addEventListener("close", () => {
      const key = $("key-dialog-input").value.trim();
      store.set("brisk.apiKey", key);
      $("api-key").value = key;
      resolve(key);
    }, { once: true });
    if (!dialog.open) dialog.showModal();
  });
}

async function api(path, init = {}) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const res = await fetch(path, { ...init, headers: headers() });
    if (res.status !== 401) return res;
    await askForKey();
  }
  throw new Error("the server refused the API key");
}

function status(text) { $("status").textContent = text; }

function current() { return conversations.find((c) => c.id === currentId); }
function save() {
  store.set("brisk.conversations", conversations);
  store.set("brisk.current", currentId);
}

function newConversation() {
  const c = { id: `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`, title: "New chat", messages: [] };
  conversations.unshift(c);
  currentId = c.id;
  save();
  renderSidebar();
  renderMessages();
}

function renderSidebar() {
  const ul = $("conversations");
  ul.replaceChildren();
  for (const c of conversations) {
    const li = document.createElement("li");
    li.className = c.id === currentId ? "active" : "";
    const title = document.createElement("span");
    title.textContent = c.title;
    const del = document.createElement("button");
    del.type = "button";
    del.title = "Delete";
    del.textContent = "×";
    del.addEventListener("click", (e) => {
      e.stopPropagation();
      conversations = conversations.filter((x) => x.id !== c.id);
      if (currentId === c.id) currentId = conversations[0]?.id ?? null;
      save();
      renderSidebar();
      renderMessages();
    });
    li.append(title, del);
    li.addEventListener("click", () => {
      currentId = c.id;
      save();
      renderSidebar();
      renderMessages();
    });
    ul.append(li);
  }
}

function statsText(s) {
  if (!s) return "";
  const parts = [];
  if (s.completion_tokens !== undefined) parts.push(`${s.completion_tokens} tokens`);
  if (s.tokens_per_second) parts.push(`${s.tokens_per_second.toFixed(1)} tok/s`);
  if (s.prompt_tokens !== undefined) parts.push(`prompt ${s.prompt_tokens}`);
  if (s.model) parts.push(s.model);
  if (s.stopped) parts.push("stopped");
  return parts.join(" · ");
}

// One message element; assistant text is rendered as Markdown (escaped first).
function messageElement(m) {
  const div = document.createElement("div");
  div.className = `msg ${m.role}`;
  const role = document.createElement("div");
  role.className = "role";
  role.textContent = m.role;
  div.append(role);
  if (m.reasoning) {
    const d = document.createElement("details");
    d.className = "reasoning";
    const summary = document.createElement("summary");
    summary.textContent = "Reasoning";
    const body = document.createElement("div");
    body.className = "body";
    body.innerHTML = renderMarkdown(m.reasoning);
    d.append(summary, body);
    div.append(d);
  }
  const body = document.createElement("div");
  body.className = "body";
  if (m.role === "assistant") body.innerHTML = renderMarkdown(m.content);
  else body.textContent = m.content;
  div.append(body);
  if (m.error) {
    const e = document.createElement("div");
    e.className = "error";
    e.textContent = m.error;
    div.append(e);
  }
  if (m.stats) {
    const s = document.createElement("div");
    s.className = "stats";
    s.textContent = statsText(m.stats);
    div.append(s);
  }
  return div;
}

function renderMessages() {
  const box = $("messages");
  box.replaceChildren(...(current()?.messages ?? []).map(messageElement));
  box.scrollTop = box.scrollHeight;
}

async function loadModels() {
  try {
    const res = await api("/v1/models");
    const body = await res.json();
    const select = $("model");
    const previous = store.get("brisk.model", "");
    select.replaceChildren();
    for (const m of body.data ?? []) {
      const o = document.createElement("option");
      o.value = m.id;
      o.textContent = m.id;
      select.append(o);
    }
    if ([...select.options].some((o) => o.value === previous)) select.value = previous;
    status(`${select.options.length} model(s)`);
  } catch (e) {
    status(`cannot list models: ${e.message}`);
  }
}

function samplerSettings() {
  const out = {};
  for (const f of SAMPLER_FIELDS) {
    const v = $(f).value.trim();
    if (v !== "") out[f] = Number(v);
  }
  return out;
}

// Reads a server-sent event stream, calling onData with each `data:` payload.
async function readEvents(res, onData) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      for (const line of event.split("\n"))
        if (line.startsWith("data: ")) onData(line.slice(6));
    }
  }
}

async function send(text) {
  if (!current()) newConversation();
  const conv = current();
  const model = $("model").value;
  conv.messages.push({ role: "user", content: text });
  if (conv.title === "New chat") conv.title = text.slice(0, 40);
  const answer = { role: "assistant", content: "", reasoning: "" };
  conv.messages.push(answer);
  save();
  renderSidebar();
  renderMessages();
  const box = $("messages");
  const element = box.lastElementChild;
  const system = $("system-prompt").value.trim();
  const messages = conv.messages.slice(0, -1).map((m) => ({ role: m.role, content: m.content }));
  if (system) messages.unshift({ role: "system", content: system });
  controller = new AbortController();
  $("send").hidden = true;
  $("stop").hidden = false;
  const started = performance.now();
  let firstToken = 0;
  let usage = null;
  let target = element;
  const draw = () => {
    const fresh = messageElement(answer);
    target.replaceWith(fresh);
    target = fresh;
    box.scrollTop = box.scrollHeight;
  };
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      signal: controller.signal,
      body: JSON.stringify({ model, messages, stream: true, stream_options: { include_usage: true }, ...samplerSettings() }),
    });
    if (res.status === 401) {
      await askForKey();
      throw new Error("API key saved: send the message again");
    }
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      throw new Error(body.error?.message ?? `HTTP ${res.status}`);
    }
    await readEvents(res, (data) => {
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message ?? "generation failed");
      if (chunk.usage) usage = chunk.usage;
      const delta = chunk.choices?.[0]?.delta;
      if (!delta) return;
      const piece = (delta.content ?? "") + (delta.reasoning_content ?? "");
      if (piece && !firstToken) firstToken = performance.now();
      answer.content += delta.content ?? "";
      answer.reasoning += delta.reasoning_content ?? "";
      draw();
    });
  } catch (e) {
    if (e.name === "AbortError") answer.stopped = true;
    else answer.error = e.message;
  } finally {
    controller = null;
    $("send").hidden = false;
    $("stop").hidden = true;
  }
  const seconds = firstToken ? (performance.now() - firstToken) / 1000 : 0;
  answer.stats = { model, stopped: answer.stopped || undefined };
  if (usage) {
    answer.stats.completion_tokens = usage.completion_tokens;
    answer.stats.prompt_tokens = usage.prompt_tokens;
    if (seconds > 0 && usage.completion_tokens > 1) answer.stats.tokens_per_second = (usage.completion_tokens - 1) / seconds;
  }
  answer.stats.seconds = (performance.now() - started) / 1000;
  save();
  draw();
}

function init() {
  $("api-key").value = apiKey();
  $("api-key").addEventListener("change", () => { store.set("brisk.apiKey", $("api-key").value.trim()); loadModels(); });
  const settings = store.get("brisk.settings", {});
  for (const f of [...SAMPLER_FIELDS, "system-prompt"]) {
    if (settings[f] !== undefined) $(f).value = settings[f];
    $(f).addEventListener("change", () => {
      const s = store.get("brisk.settings", {});
      s[f] = $(f).value;
      store.set("brisk.settings", s);
    });
  }
  $("model").addEventListener("change", () => store.set("brisk.model", $("model").value));
  $("new-chat").addEventListener("click", newConversation);
  $("stop").addEventListener("click", () => controller?.abort());
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value.trim();
    if (!text || controller) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  if (!current()) currentId = conversations[0]?.id ?? null;
  renderSidebar();
  renderMessages();
  loadModels();
}

init();
