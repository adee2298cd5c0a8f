// One user's memory: the blocks page by page (event-time order), their retention policy, and for the admin
// their keys. The reads go to /v1/users/{user}/..., which answer the admin or that user's own key only:
// another user's key gets 403, and the router shows the refusal page.

import { del, enc, get, post, signOut } from "../api.js";
import { act, clear, copyButton, facts, field, h, leaveFor, link, notice, num, pager, plural, route, statusRegion, table, time, withQuery } from "../dom.js";
import { capabilities } from "../caps.js";
import { userEditSection } from "./edits.js";
import { sessionTimeline } from "./sessions.js";
import { pathless, pathlessHelp, policyText } from "./users.js";

const PAGE = 50;

export function excerpt(text, n = 160) {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > n ? `${line.slice(0, n - 1)}…` : line;
}

export function statusBadge(status) {
  return h("span", { class: `badge ${status}` }, status);
}

// Blocks of one exchange seen from each perspective (dual, speakers) are one row: the first block's, with
// the perspectives named; a fact is its own row.
export function exchangeRows(blocks) {
  const rows = [];
  const seen = new Map();
  for (const b of blocks) {
    const key = b.kind === "fact" ? null : [b.conversation_id, b.session_id, b.exchange_index, b.ingest_time, b.content_hash].join("\u0000");
    if (key !== null && seen.has(key)) {
      seen.get(key).perspectives.push(b.perspective);
      continue;
    }
    const row = { block: b, perspectives: [b.perspective] };
    if (key !== null) seen.set(key, row);
    rows.push(row);
  }
  return rows;
}

// Why the admin has no write on a user's memory: the API's rule, and how to act anyway.
export function adminWritesNote(user) {
  return notice("info", `The admin key reads ${user}'s memory but does not write into it: editing, deleting, a TTL and ending a session take ${user}'s own key (the /v1 API's rule: every write into a memory is made with a key of its user). To act here, make ${user} a key on their page and sign in with it.`, "admin-read-only");
}

export const NO_MEMORIES = "No memories yet. An agent adds them with this user's key: POST /v1/memories with a list of messages, the MCP tool add_memory, or memlane add on the server (see docs/http.md).";

// The policy that applies to the user, from the table of every policy (one cheap read for the admin).
async function adminRetention(user) {
  const policies = await get("/v1/retention");
  if (policies.users[user]) return { policy: policies.users[user], source: "user" };
  return { policy: policies.default, source: policies.default ? "default" : "none" };
}

export async function userPage(view, { parts, query, me }) {
  const user = parts[1];
  if (pathless(user)) {
    clear(view,
      h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, user),
      h("h1", {}, `${user}'s memory`),
      notice("info", pathlessHelp(user), "pathless"));
    return;
  }
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

  const rows = exchangeRows(page.items).map(({ block: b, perspectives }) => h("tr", { testid: "block-row", "data-block": b.block_id },
    h("td", {}, h("span", { class: "when" }, time(b.time))),
    h("td", { class: "id" }, b.session_id),
    h("td", { testid: "block-perspectives" }, b.kind === "fact" ? "fact" : perspectives.join(", ")),
    h("td", { class: "message-cell" }, link(route("users", user, "blocks", b.block_id), excerpt(b.message), { testid: "block-link" })),
    h("td", {}, statusBadge(b.extraction_status))));

  clear(view,
    h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, user),
    h("h1", {}, `${user}'s memory`),
    facts([
      info ? ["Display name", info.display_name || "", "display-name"] : null,
      info ? ["Metadata", Object.keys(info.metadata || {}).length ? JSON.stringify(info.metadata) : "", "user-metadata"] : null,
      ["Blocks", num(page.total), "block-total"],
      info ? ["Last activity", time(info.last_activity) || "never", "last-activity"] : null,
      ["Retention", `${policyText(retention.policy)} (${retention.source === "user" ? "their own policy" : retention.source === "default" ? "the default policy" : "no policy"})`],
    ]),
    h("p", { class: "actions" },
      link(route("users", user, "search"), "Search this memory", { class: "button primary", testid: "to-search" })),
    status,
    me.admin ? adminWritesNote(user) : null,
    sessions,
    h("h2", {}, "Blocks"),
    h("p", { class: "muted" }, "In event-time order, oldest first. Each row is one exchange of a conversation (its blocks, one per perspective, open from its page) or one fact."),
    filter,
    page.total === 0 ? notice("info", session || conversation ? "No block matches." : NO_MEMORIES, "no-blocks") : null,
    table(`Blocks ${num(page.total ? page.offset + 1 : 0)}–${num(page.offset + page.items.length)} of ${num(page.total)}`,
      ["Event time", "Session", "Perspectives", "Message", "Extraction"], rows, { testid: "blocks" }),
    pager(page.total, page.offset, PAGE, (o) => here({ offset: o })),
    info && caps.has("PATCH /v1/users/{user}") ? userEditSection(user, info, status) : null,
    keys ? keySection(user, keys, status) : null,
    dangerSection(user, me, status));
}

function keyRows(user, keys, status, redraw) {
  return keys.map((k) => {
    const revoke = h("button", { type: "button", class: "danger small", testid: "revoke-key" }, `Revoke ${k.key_id}`);
    revoke.addEventListener("click", async () => {
      const ok = await act(status, {
        title: "Revoke this key?",
        body: `Key ${k.key_id} (${k.label || "no label"}) of “${user}” will stop working at once, on every server of this store.`,
        confirmLabel: "Revoke",
        run: () => del(`/v1/users/${enc(user)}/keys/${enc(k.key_id)}`),
        done: () => `Key ${k.key_id} revoked.`,
      });
      if (ok) await redraw();
    });
    return h("tr", { testid: "key-row", "data-key": k.key_id },
      h("td", { class: "mono" }, k.key_id), h("td", {}, k.label), h("td", {}, k.role || ""), h("td", {}, time(k.created_at)), h("td", {}, revoke));
  });
}

// The user's keys (admin): the list is read again after each create or revoke; a new key is shown once,
// with a button that copies it.
function keySection(user, keys, status) {
  const label = h("input", { type: "text", name: "label", maxlength: 256, autocomplete: "off", testid: "key-label" });
  const shown = h("div", { testid: "new-key" });
  const list = h("div", {});
  const redraw = async (current) => {
    const now = current ?? await get(`/v1/users/${enc(user)}/keys`);
    clear(list, table(plural(now.length, "key"), ["Key id", "Label", "Role", "Created", ""], keyRows(user, now, status, () => redraw()), { testid: "keys" }));
  };
  redraw(keys);
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
      clear(shown, h("div", { class: "curl" }, field("The new key (shown this once)", out), copyButton(out)));
      out.select();
      label.value = "";
      await redraw();
    }
  });
  return h("section", { "aria-labelledby": "keys-h" },
    h("h2", { id: "keys-h" }, "Keys"),
    list, form, shown);
}

function dangerSection(user, me, status) {
  const button = h("button", { type: "button", class: "danger", testid: "delete-user" }, `Delete user ${user}`);
  button.addEventListener("click", () => act(status, {
    title: `Delete user “${user}”?`,
    body: "Every memory, fact, key and extraction job of this user is deleted for good. This cannot be undone.",
    confirmLabel: "Delete user",
    run: () => del(`/v1/users/${enc(user)}`),
    done: (r) => `User “${r.user}” deleted: ${plural(r.blocks_deleted, "block")} and ${plural(r.keys_deleted, "key")}.`,
    // The admin goes back to the users; a user who deleted themself holds a key that no longer opens anything.
    then: () => (me.admin ? leaveFor(route("users")) : (signOut(), leaveFor("#/signin"))),
  }));
  return h("section", { class: "danger-zone", "aria-labelledby": "danger-h" },
    h("h2", { id: "danger-h" }, "Delete"),
    h("p", {}, me.admin ? "Deletes the user with everything of theirs." : "Deletes your user with all your memories and keys (this key included)."),
    button);
}
