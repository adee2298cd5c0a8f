// Edits of a user's details (display name, metadata) and of a session's (annotations, metadata): each asks
// first and sends one PATCH with only what changed, which the server applies whole or not at all.

import { enc, patch } from "../api.js";
import { act, clear, field, h, notice, refresh } from "../dom.js";

// "key=value" pairs, one a line (or comma-separated), as the API's annotations object.
export function parseAnnotations(text) {
  const out = {};
  for (const part of text.split(/[\n,]/).map((x) => x.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at < 1) throw new Error(`“${part}” is not key=value`);
    out[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return out;
}

export function annotationLines(annotations) {
  return Object.entries(annotations || {}).map(([k, v]) => `${k}=${v}`).join("\n");
}

// A JSON object, as the API's metadata; empty text is the empty object.
export function parseMetadata(text) {
  if (!text.trim()) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`not JSON (${err.message})`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error("must be a JSON object");
  return value;
}

export function metadataText(metadata) {
  return Object.keys(metadata || {}).length ? JSON.stringify(metadata, null, 2) : "";
}

function refuse(status, what, err) {
  clear(status, notice("error", `Nothing was changed: ${what}: ${err.message}`, "action-error"));
}

// The form of one edit: `fields` are [name, label, control, hint, initial text, parse]; only the fields whose
// text changed are sent. After a save the page is read again from the server.
function editForm({ testid, fields, status, title, path, what }) {
  const form = h("form", { class: "card", testid },
    fields.map(([, label, control, hint]) => field(label, control, hint)),
    h("button", { type: "submit", class: "primary" }, "Save changes"));
  const current = fields.map(([, , , , initial]) => initial);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {};
    for (const [i, [name, , control, , , parse]] of fields.entries()) {
      if (control.value.trim() === current[i].trim()) continue;
      try {
        body[name] = parse(control.value);
      } catch (err) {
        refuse(status, name, err);
        return;
      }
    }
    const names = Object.keys(body);
    if (names.length === 0) {
      clear(status, notice("info", "Nothing to save: no field changed."));
      return;
    }
    await act(status, {
      title,
      body: `${what}: ${names.join(" and ")} will be replaced by what you entered.`,
      confirmLabel: "Save",
      run: () => patch(path, body),
      done: () => `Saved: ${names.join(" and ")}.`,
      then: refresh,
    });
  });
  return form;
}

// A user's display name and metadata (PATCH /v1/users/{user}: the admin, or the user's own key).
export function userEditSection(user, info, status) {
  const name = h("input", { type: "text", name: "display_name", maxlength: 256, value: info.display_name || "", testid: "edit-display-name" });
  const meta = h("textarea", { name: "metadata", rows: 4, class: "mono", testid: "edit-user-metadata" }, metadataText(info.metadata));
  const form = editForm({
    testid: "user-edit-form",
    status,
    title: `Change ${user}'s details?`,
    path: `/v1/users/${enc(user)}`,
    what: `User “${user}”`,
    fields: [
      ["display_name", "Display name", name, "Empty: no display name.", info.display_name || "", (v) => (v.trim() ? v.trim() : null)],
      ["metadata", "Metadata (a JSON object)", meta, "It replaces the user's metadata whole; empty: none.", metadataText(info.metadata), parseMetadata],
    ],
  });
  return h("section", { "aria-labelledby": "user-edit-h" }, h("h2", { id: "user-edit-h" }, "Name and metadata"), form);
}

// A session's annotations and metadata (PATCH /v1/sessions/{id}: the user's own key; refused once ended).
export function sessionEditSection(s, status) {
  const annotations = h("textarea", { name: "annotations", rows: 3, testid: "edit-session-annotations" }, annotationLines(s.annotations));
  const meta = h("textarea", { name: "metadata", rows: 4, class: "mono", testid: "edit-session-metadata" }, metadataText(s.metadata));
  const form = editForm({
    testid: "session-edit-form",
    status,
    title: `Change session “${s.session_id}”?`,
    path: `/v1/sessions/${enc(s.session_id)}`,
    what: `Session “${s.session_id}”`,
    fields: [
      ["annotations", "Annotations", annotations, "key=value, one a line; they replace the session's.", annotationLines(s.annotations), parseAnnotations],
      ["metadata", "Metadata (a JSON object)", meta, "It replaces the session's metadata whole; empty: none.", metadataText(s.metadata), parseMetadata],
    ],
  });
  return h("section", { "aria-labelledby": "session-edit-h" }, h("h2", { id: "session-edit-h" }, "Annotations and metadata"), form);
}
