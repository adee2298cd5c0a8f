// Building the page. Everything a memory holds goes in as text (a Text node or textContent): no function
// here parses markup, so a stored "<script>" or "javascript:" is shown as the characters it is.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "testid") el.dataset.testid = value;
    else if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "href") el.setAttribute("href", safeHref(value));
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Links are the console's own routes ("#/...") only.
function safeHref(value) {
  const s = String(value);
  return s.startsWith("#/") ? s : "#/";
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function route(...parts) {
  return "#/" + parts.map((p) => encodeURIComponent(p)).join("/");
}

export function withQuery(hash, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
  const s = params.toString();
  return s ? `${hash}?${s}` : hash;
}

export function link(hash, text, attrs = {}) {
  return h("a", { href: hash, ...attrs }, text);
}

export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  const hintEl = hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl);
}

export function notice(kind, text, testid) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", testid }, text);
}

// A definition list from [term, value] pairs; values are text or nodes.
export function facts(pairs, attrs = {}) {
  return h("dl", { class: "facts", ...attrs }, pairs.filter(Boolean).map(([term, value, testid]) => [
    h("dt", {}, term),
    h("dd", { testid }, value === null || value === undefined || value === "" ? h("span", { class: "muted" }, "none") : value),
  ]));
}

export function table(caption, heads, rows, attrs = {}) {
  // Each cell carries its column's name, which the phone layout shows before it (the head is hidden there).
  for (const row of rows) {
    [...row.children].forEach((cell, i) => { if (heads[i]) cell.dataset.label = heads[i]; });
  }
  return h("div", { class: "scroll" },
    h("table", attrs,
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows)));
}

export function time(iso) {
  if (!iso) return "";
  return iso.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", " UTC");
}

export function ago(seconds) {
  if (seconds === null || seconds === undefined) return "none";
  const s = Math.round(seconds);
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

// Asks before a write. Resolves true only when the person confirms; Escape or Cancel resolve false.
export function confirmAction(title, body, confirmLabel) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  clear(document.getElementById("confirm-body"), typeof body === "string" ? h("p", {}, body) : body);
  document.getElementById("confirm-ok").textContent = confirmLabel;
  const opener = document.activeElement;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      if (opener && opener.isConnected) opener.focus();
      resolve(dialog.returnValue === "ok");
    }, { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

// Runs a write after confirmation and reports into `status`: on failure nothing on the page changes but the
// message (the server refused, so the store is as it was). Resolves to the answer, or null.
export async function act(status, { title, body, confirmLabel, run, done }) {
  if (!(await confirmAction(title, body, confirmLabel))) return null;
  clear(status, notice("info", "Working…"));
  try {
    const answer = await run();
    clear(status, notice("ok", done(answer), "action-ok"));
    return answer ?? true;
  } catch (err) {
    clear(status, notice("error", `Nothing was changed: ${err.describe ? err.describe() : err.message}`, "action-error"));
    return null;
  }
}

export function statusRegion() {
  return h("div", { class: "status", testid: "status" });
}

export function pager(total, offset, limit, hrefFor) {
  const last = Math.max(0, Math.floor((total - 1) / limit) * limit);
  const from = total === 0 ? 0 : offset + 1;
  const to = Math.min(total, offset + limit);
  const button = (label, target, enabled) => enabled
    ? link(hrefFor(target), label, { class: "button" })
    : h("span", { class: "button disabled", "aria-disabled": "true" }, label);
  return h("nav", { class: "pager", "aria-label": "Pages" },
    button("First", 0, offset > 0),
    button("Previous", Math.max(0, offset - limit), offset > 0),
    h("span", { testid: "page-range" }, `${from}–${to} of ${total}`),
    button("Next", offset + limit, offset + limit < total),
    button("Last", last, offset < last));
}
