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

// One time format on every page: the UTC date and time to the second, whatever the server's ISO form
// (an offset, a fraction, "Z") or an epoch in seconds.
export function time(value) {
  if (value === null || value === undefined || value === "") return "";
  const d = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return `${d.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// A count as people read it: 100,000.
export function num(n) {
  return Number(n).toLocaleString("en-US");
}

// "1 key", "2 keys", "100,000 blocks"; `many` for the irregular plurals.
export function plural(n, one, many = `${one}s`) {
  return `${num(n)} ${Number(n) === 1 ? one : many}`;
}

const UNITS = [[86400, "day", "days"], [3600, "hour", "hours"], [60, "minute", "minutes"], [1, "second", "seconds"]];

// A duration in seconds as people say it: "1 day", "2 hours 30 minutes" (the two largest parts).
export function duration(seconds) {
  let rest = Math.round(Number(seconds));
  if (rest === 0) return "0 seconds";
  const parts = [];
  for (const [size, one, many] of UNITS) {
    const n = Math.floor(rest / size);
    if (n > 0) {
      parts.push(plural(n, one, many));
      rest -= n * size;
    }
  }
  return parts.slice(0, 2).join(" ");
}

export function ago(seconds) {
  if (seconds === null || seconds === undefined) return "none";
  const s = Math.round(seconds);
  if (s < 90) return `${s} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

// What a page says after a write that reloads it or leaves it: shown by the next page's status region.
let pendingFlash = null;

function flash(kind, text, testid) {
  pendingFlash = { kind, text, testid };
}

// What no page of this render took is not carried to a later one.
export function dropFlash() {
  pendingFlash = null;
}

// Renders the page at the current address again, from the server (after a write, what changed is read back).
export function refresh() {
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

// Goes to `hash` in place of the current page (after a delete, the deleted thing's page is no place to go
// back to).
export function leaveFor(hash) {
  if (location.hash === hash) refresh();
  else location.replace(hash);
}

// `s` as one word of a POSIX shell, whatever it holds (o'brien -> 'o'\''brien').
export function shellQuote(s) {
  return `'${String(s).replace(/'/g, "'\\''")}'`;
}

// A button that copies the text of `input` (selecting it when the browser refuses the clipboard).
export function copyButton(input, label = "Copy") {
  const button = h("button", { type: "button", testid: "copy" }, label);
  button.addEventListener("click", async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Selected: press Ctrl+C";
    }
  });
  return button;
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
// message (the server refused, so the store is as it was). `then` (refresh, or a page to go to) runs after a
// success, and the next page says the outcome. Resolves to the answer, or null.
export async function act(status, { title, body, confirmLabel, run, done, then }) {
  if (!(await confirmAction(title, body, confirmLabel))) return null;
  clear(status, notice("info", "Working…"));
  try {
    const answer = await run();
    if (then) {
      flash("ok", done(answer), "action-ok");
      then(answer);
    } else {
      clear(status, notice("ok", done(answer), "action-ok"));
    }
    return answer ?? true;
  } catch (err) {
    clear(status, notice("error", `Nothing was changed: ${err.describe ? err.describe() : err.message}`, "action-error"));
    return null;
  }
}

// The page's place for what its writes did; it shows what the write that led here said.
export function statusRegion() {
  const region = h("div", { class: "status", testid: "status" });
  if (pendingFlash) {
    const { kind, text, testid } = pendingFlash;
    pendingFlash = null;
    region.append(notice(kind, text, testid));
  }
  return region;
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
    h("span", { testid: "page-range" }, `${num(from)}–${num(to)} of ${num(total)}`),
    button("Next", offset + limit, offset + limit < total),
    button("Last", last, offset < last));
}
