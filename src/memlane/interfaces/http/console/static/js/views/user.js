// One user's memory: the blocks page by page (event-time order), their retention policy, and for the admin
// their keys. The reads go to /v1/users/{user}/..., which answer the admin or that user's own key only:
// another user's key gets 403, and the router shows the refusal page.

import { del, enc, get, post } from "../api.js";
import { act, clear, facts, field, h, link, notice, pager, route, statusRegion, table, time, withQuery } from "../dom.js";
import { capabilities } from "../caps.js";
import { userEditSection } from "./edits.js";
import { sessionTimeline } from "./sessions.js";
import { policyText } from "./users.js";

const PAGE = 50;

export function excerpt(text, n = 160) {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > n ? `${line.slice(0, n - 1)}…` : line;
}

export function statusBadge(status) {
  return h("span", { class: `badge ${status}` }, status);
}

// The policy that applies to the user, from the table of every policy (one cheap read for the admin).
async function adminRetention(user) {
  const policies = await get("/v1/retention");
  if (policies.users[user]) return { policy: policies.users[user], source: "user" };
  return { policy: policies.default, source: policies.default ? "default" : "none" };
}

export async function userPage(view, { parts, query, me }) {
  const user = parts[1];
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const session = query.get("session") || "";
  const conversation = query.get("conversation") || "";
  const base = `/v1/users/${enc(user)}`;
  const caps = await capabilities();
  // The page's reads go out together: it takes as long as the slowest of them.
  const [page, retention, keys, sessions, info] = await Promise.all([
    get(`${base}/memories`, { limit: PAGE, offset, session_id: session, conversation_id: conversation }),
    me.admin ? adminRetention(user) : get(`${base}/retention`),
    me.admin ? get(`${base}/keys`) : null,
    caps.has("GET /v1/users/{user}/sessions") ? sessionTimeline(user, query) : null,
    caps.has("GET /v1/users/{user}") ? get(base) : null,
  ]);
  const status = statusRegion();
  const here = (extra) => withQuery(route("users", user), { session, conversation, offset, ...extra });

  const sessionIn = h("input", { type: "text", name: "session", value: session, testid: "session-filter" });
  const conversationIn = h("input", { type: "text", name: "conversation", value: conversation });
  const filter = h("form", { class: "inline" }, field("Session id", sessionIn), field("Conversation id", conversationIn),
    h("button", { type: "submit" }, "Show"));
  filter.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = withQuery(route("users", user), { session: sessionIn.value.trim(), conversation: conversationIn.value.trim() });
  });

  const rows = page.items.map((b) => h("tr", { testid: "block-row", "data-block": b.block_id },
    h("td", {}, h("span", { class: "when" }, b.time_annotation)),
    h("td", {}, b.session_id),
    h("td", {}, b.perspective),
    h("td", { class: "message-cell" }, link(route("users", user, "blocks", b.block_id), excerpt(b.message), { testid: "block-link" })),
    h("td", {}, statusBadge(b.extraction_status))));

  clear(view,
    h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, user),
    h("h1", {}, `${user}'s memory`),
    facts([
      info ? ["Display name", info.display_name || "", "display-name"] : null,
      info ? ["Metadata", Object.keys(info.metadata || {}).length ? JSON.stringify(info.metadata) : "", "user-metadata"] : null,
      ["Blocks", String(page.total), "block-total"],
      info ? ["Last activity", time(info.last_activity) || "never", "last-activity"] : null,
      ["Retention", `${policyText(retention.policy)} (${retention.source === "user" ? "their own policy" : retention.source === "default" ? "the default policy" : "no policy"})`],
    ]),
    h("p", { class: "actions" },
      link(route("users", user, "search"), "Search this memory", { class: "button primary", testid: "to-search" })),
    status,
    sessions,
    h("h2", {}, "Blocks"),
    h("p", { class: "muted" }, "In event-time order, oldest first. Each block is one exchange of a conversation, from one side (its perspective)."),
    filter,
    page.total === 0 ? notice("info", session || conversation ? "No block matches." : "No memories yet.", "no-blocks") : null,
    table(`Blocks ${page.total ? page.offset + 1 : 0}–${page.offset + page.items.length} of ${page.total}`,
      ["Event time", "Session", "Perspective", "Message", "Extraction"], rows, { testid: "blocks" }),
    pager(page.total, page.offset, PAGE, (o) => here({ offset: o })),
    info && caps.has("PATCH /v1/users/{user}") ? userEditSection(user, info, status, (u) => {
      clear(view.querySelector("[data-testid=display-name]"), u.display_name || h("span", { class: "muted" }, "none"));
      clear(view.querySelector("[data-testid=user-metadata]"),
        Object.keys(u.metadata || {}).length ? JSON.stringify(u.metadata) : h("span", { class: "muted" }, "none"));
    }) : null,
    keys ? keySection(user, keys, status) : null,
    dangerSection(user, me, status));
}

function keySection(user, keys, status) {
  const label = h("input", { type: "text", name: "label", maxlength: 256, autocomplete: "off", testid: "key-label" });
  const shown = h("div", { testid: "new-key" });
  const form = h("form", { class: "inline" }, field("Label (who holds the key)", label), h("button", { type: "submit" }, "Create key"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const made = await act(status, {
      title: "Create a key?",
      body: `A new API key for “${user}” will be made. It is shown once: copy it then.`,
      confirmLabel: "Create key",
      run: () => post(`/v1/users/${enc(user)}/keys`, { label: label.value }),
      done: (r) => `Key ${r.key_id} created for ${r.user}.`,
    });
    if (made && made.key) {
      const out = h("input", { type: "text", readonly: true, value: made.key, testid: "new-key-value", class: "mono wide" });
      clear(shown, field("The new key (shown this once)", out));
      out.select();
    }
  });
  const rows = keys.map((k) => {
    const revoke = h("button", { type: "button", class: "danger small", testid: "revoke-key" }, `Revoke ${k.key_id}`);
    const row = h("tr", { testid: "key-row", "data-key": k.key_id },
      h("td", { class: "mono" }, k.key_id), h("td", {}, k.label), h("td", {}, time(k.created_at)), h("td", {}, revoke));
    revoke.addEventListener("click", async () => {
      const ok = await act(status, {
        title: "Revoke this key?",
        body: `Key ${k.key_id} (${k.label || "no label"}) of “${user}” will stop working at once, on every server of this store.`,
        confirmLabel: "Revoke",
        run: () => del(`/v1/users/${enc(user)}/keys/${enc(k.key_id)}`),
        done: () => `Key ${k.key_id} revoked.`,
      });
      if (ok) row.remove();
    });
    return row;
  });
  return h("section", { "aria-labelledby": "keys-h" },
    h("h2", { id: "keys-h" }, "Keys"),
    table(`${keys.length} keys`, ["Key id", "Label", "Created", ""], rows, { testid: "keys" }),
    form, shown);
}

function dangerSection(user, me, status) {
  const button = h("button", { type: "button", class: "danger", testid: "delete-user" }, `Delete user ${user}`);
  button.addEventListener("click", async () => {
    const done = await act(status, {
      title: `Delete user “${user}”?`,
      body: "Every memory, fact, key and extraction job of this user is deleted for good. This cannot be undone.",
      confirmLabel: "Delete user",
      run: () => del(`/v1/users/${enc(user)}`),
      done: (r) => `User “${r.user}” deleted: ${r.blocks_deleted} blocks and ${r.keys_deleted} keys.`,
    });
    if (done && me.admin) setTimeout(() => { location.hash = route("users"); }, 1200);
  });
  return h("section", { class: "danger-zone", "aria-labelledby": "danger-h" },
    h("h2", { id: "danger-h" }, "Delete"),
    h("p", {}, me.admin ? "Deletes the user with everything of theirs." : "Deletes your user with all your memories and keys (this key included)."),
    button);
}
