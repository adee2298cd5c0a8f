// Sessions (servers with the memory model): a user's sessions on a timeline, newest started first, and one
// session with its blocks in order. End and delete take the user's own key, as the API's routes do.

import { del, enc, get, post } from "../api.js";
import { act, clear, facts, field, h, link, notice, pager, route, statusRegion, table, time, withQuery } from "../dom.js";
import { sessionEditSection } from "./edits.js";
import { excerpt, statusBadge } from "./user.js";

const SESSIONS_PAGE = 20;
const BLOCKS_PAGE = 50;

function annotationText(annotations) {
  const pairs = Object.entries(annotations || {});
  return pairs.length ? pairs.map(([k, v]) => `${k}=${v}`).join(", ") : "";
}

function ttlText(ttl) {
  return ttl === null || ttl === undefined ? "the server's" : ttl === 0 ? "never expire" : `${ttl} s`;
}

function stateBadge(s) {
  return h("span", { class: `badge ${s.ended ? "off" : "done"}` }, s.ended ? `ended ${time(s.ended_at)}` : "open");
}

// The timeline section of a user's page.
export async function sessionTimeline(user, query) {
  const offset = Math.max(0, Number.parseInt(query.get("soffset") || "0", 10) || 0);
  const page = await get(`/v1/users/${enc(user)}/sessions`, { limit: SESSIONS_PAGE, offset });
  const here = (o) => withQuery(route("users", user), { soffset: o });
  return h("section", { "aria-labelledby": "sessions-h", testid: "sessions" },
    h("h2", { id: "sessions-h" }, `Sessions (${page.total})`),
    page.total === 0 ? notice("info", "No sessions yet.") : null,
    h("ol", { class: "timeline" }, page.items.map((s) => h("li", { testid: "session-row", "data-session": s.session_id },
      h("span", { class: "when" }, time(s.started_at)),
      h("span", {}, link(route("users", user, "sessions", s.session_id), s.session_id, { testid: "session-link" })),
      stateBadge(s),
      h("span", { class: "muted" }, `${s.blocks} blocks · conversation ${s.conversation_id}`),
      annotationText(s.annotations) ? h("span", { class: "muted" }, annotationText(s.annotations)) : null))),
    page.total > SESSIONS_PAGE ? pager(page.total, page.offset, SESSIONS_PAGE, here) : null);
}

export async function sessionPage(view, { parts, query, me }) {
  const [, user, , sessionId] = parts;
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const [s, blocks] = await Promise.all([
    get(`/v1/users/${enc(user)}/sessions/${enc(sessionId)}`),
    get(`/v1/users/${enc(user)}/memories`, { session_id: sessionId, limit: BLOCKS_PAGE, offset }),
  ]);
  const status = statusRegion();
  const actions = h("div", { class: "actions" });
  if (!me.admin) {
    if (!s.ended) {
      const end = h("button", { type: "button", testid: "end-session" }, "End this session");
      end.addEventListener("click", async () => {
        const done = await act(status, {
          title: `End session “${s.session_id}”?`,
          body: "Its blocks stay readable and searchable; new writes and edits into it are refused from then on.",
          confirmLabel: "End session",
          run: () => post(`/v1/sessions/${enc(s.session_id)}/end`, {}),
          done: (r) => `Session ended at ${time(r.ended_at)}.`,
        });
        if (done) {
          end.remove();
          clear(view.querySelector("[data-testid=session-state]"), stateBadge(done));
        }
      });
      actions.append(end);
    }
    const remove = h("button", { type: "button", class: "danger", testid: "delete-session" }, "Delete this session");
    remove.addEventListener("click", async () => {
      const done = await act(status, {
        title: `Delete session “${s.session_id}”?`,
        body: `The session and its ${s.blocks} blocks are deleted for good, with their vectors, facts and jobs.`,
        confirmLabel: "Delete session",
        run: () => del(`/v1/sessions/${enc(s.session_id)}`),
        done: (r) => `Session deleted with ${r.blocks_deleted} blocks.`,
      });
      if (done) {
        actions.remove();
        clear(view.querySelector("[data-testid=session-blocks]"), h("p", { testid: "session-deleted" }, "This session was deleted."));
      }
    });
    actions.append(remove);
    if (!s.ended) actions.append(ttlForm(s, status));
  }
  const editor = !me.admin && !s.ended ? sessionEditSection(s, status, (u) => {
    clear(view.querySelector("[data-testid=session-annotations]"), annotationText(u.annotations) || h("span", { class: "muted" }, "none"));
    clear(view.querySelector("[data-testid=session-metadata]"),
      Object.keys(u.metadata || {}).length ? JSON.stringify(u.metadata) : h("span", { class: "muted" }, "none"));
  }) : null;
  const rows = blocks.items.map((b) => h("tr", { testid: "block-row", "data-block": b.block_id },
    h("td", {}, h("span", { class: "when" }, b.time_annotation)),
    h("td", {}, String(b.exchange_index)),
    h("td", {}, b.kind || "exchange"),
    h("td", {}, b.perspective),
    h("td", { class: "message-cell" }, link(route("users", user, "blocks", b.block_id), excerpt(b.message), { testid: "block-link" })),
    h("td", {}, statusBadge(b.extraction_status))));
  clear(view,
    h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, link(route("users", user), user), " / session"),
    h("h1", {}, `Session ${s.session_id}`),
    facts([
      ["State", h("span", { testid: "session-state" }, stateBadge(s))],
      ["Started", time(s.started_at)],
      ["Conversation", s.conversation_id],
      ["Blocks", String(s.blocks), "session-blocks-count"],
      ["Annotations", annotationText(s.annotations), "session-annotations"],
      ["Metadata", Object.keys(s.metadata || {}).length ? JSON.stringify(s.metadata) : "", "session-metadata"],
      ["Default TTL of its blocks", ttlText(s.default_ttl_s)],
    ]),
    actions, status, editor,
    h("section", { testid: "session-blocks" },
      h("h2", {}, "Blocks in order"),
      table(`Blocks ${blocks.total ? blocks.offset + 1 : 0}–${blocks.offset + blocks.items.length} of ${blocks.total}`,
        ["Event time", "Exchange", "Kind", "Perspective", "Message", "Extraction"], rows, { testid: "blocks" }),
      pager(blocks.total, blocks.offset, BLOCKS_PAGE, (o) => withQuery(route("users", user, "sessions", sessionId), { offset: o }))));
}

// A TTL for every block of the session at once (POST /v1/memories/ttl): each block's clock restarts now.
function ttlForm(s, status) {
  const ttl = h("input", { type: "number", name: "ttl_s", min: 0, required: true, testid: "session-ttl" });
  const form = h("form", { class: "inline" },
    field("TTL of all its blocks, in seconds", ttl, "From now; 0: they never expire."),
    h("button", { type: "submit" }, "Set TTL"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const seconds = Number(ttl.value);
    await act(status, {
      title: "Set a TTL for every block of this session?",
      body: seconds === 0 ? "Its blocks will never expire." : `Each of its blocks expires ${seconds} seconds from now and is then invisible to every read.`,
      confirmLabel: "Set TTL",
      run: () => post("/v1/memories/ttl", { ttl_s: seconds, session_id: s.session_id }),
      done: (r) => `${r.changed} blocks got the new TTL.`,
    });
  });
  return form;
}
