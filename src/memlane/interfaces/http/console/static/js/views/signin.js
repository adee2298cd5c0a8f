// Sign-in: the key is tried against GET /v1/whoami before it is kept (for this tab only).

import { ApiError, api, signIn } from "../api.js";
import { clear, field, h, notice, statusRegion } from "../dom.js";

// Where to go after signing in: the console's own address the tab was sent here from, else its start.
function nextAddress(query) {
  const next = query.get("next") || "";
  return next.startsWith("#/") && !next.startsWith("#/signin") ? next : "#/";
}

export async function signInPage(view, { query }) {
  const input = h("input", { type: "password", name: "key", autocomplete: "off", spellcheck: "false", required: true, testid: "key" });
  const status = statusRegion();
  const form = h("form", { class: "card narrow", testid: "signin" },
    h("h1", {}, "Sign in"),
    h("p", {}, "Paste an API key: the admin key (MEMLANE_ADMIN_KEY) sees every user; a user's key (mlk_…) sees that user's memory only. The key is kept by this browser tab until it closes, and sent only to this server."),
    query.get("expired") ? notice("error", "The server no longer accepts the key this tab held (it was revoked, or its user deleted). Sign in again.", "expired") : null,
    field("API key", input),
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const candidate = input.value.trim();
    clear(status, notice("info", "Checking the key…"));
    try {
      const me = await api("GET", "/v1/whoami", { bearer: candidate });
      signIn(candidate, me);
      location.replace(nextAddress(query));
    } catch (err) {
      const text = err instanceof ApiError && err.status === 401
        ? "This key was refused: it is unknown, mistyped or revoked. Nothing was kept."
        : `The key could not be checked: ${err.describe ? err.describe() : err.message}`;
      clear(status, notice("error", text, "signin-error"));
      input.select();
    }
  });
  clear(view, form);
  input.focus();
}
