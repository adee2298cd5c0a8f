// Sessions (servers with the memory model): a user's sessions on a timeline, oldest started first, and one
// session with its blocks in order. End and delete take the user's own key, as the API's routes do.

import { del, enc, get, post } from "../api.js";
import { act, clear, duration, facts, field, h, leaveFor, link, notice, num, pager, plural, refresh, route, statusRegion, table, time, withQuery } from "../dom.js";
import { sessionEditSection } from "./edits.js";
import { adminWritesNote, exchangeRows, excerpt, NO_MEMORIES, statusBadge } from "./user.js";

const SESSIONS_PAGE = 20;
const BLOCKS_PAGE = 50;

function annotationText(annotations) {
  const pairs = Object.entries(annotations || {});
  return pairs.length ? pairs.map(([k, v]) => `${k}=${v}`).join(", ") : "";
}

export function ttlText(ttl) {
  return ttl === null || ttl === undefined ? "the server's" : ttl === 0 ? "never expire" : duration(ttl);
}

function stateBadge(s) {
  return h("span", { class: `badge ${s.ended ? "off" : "done"}` }, s.ended ? `ended ${time(s.ended_at)}` : "open");
}

// A page of the user's sessions, oldest started first like their blocks. The API lists the latest started
// first, so the page `offset` from the oldest is the API's page that ends `offset` from its last.
async function oldestFirst(user, offset) {
  const path = `/v1/users/${enc(user)}/sessions`;
  const first = await get(path, { limit: SESSIONS_PAGE, offset: 0 });
  const total = first.total;
  const end = Math.max(0, total - offset);
  const start = Math.max(0, end - SESSIONS_PAGE);
  const items = start === 0 && end === first.items.length ? first.items
    : end > start ? (await get(path, { limit: end - start, offset: start })).items : [];
  return { total, offset, items: [...items].reverse() };
}

// The timeline section of a user's page.
export async function sessionTimeline(user, query) {
  const offset = Math.max(0, Number.parseInt(query.get("soffset") || "0", 10) || 0);
  const page = await oldestFirst(user, offset);
  const here = (o) => withQuery(route("users", user), { soffset: o });
  return h("section", { "aria-labelledby": "sessions-h", testid: "sessions" },
    h("h2", { id: "sessions-h" }, `Sessions (${num(page.total)})`),
    h("p", { class: "muted" }, "Oldest started first, as the blocks below."),
    page.total === 0 ? notice("info", "No sessions yet: a session starts with the first memory added into it (session_id in POST /v1/memories), or with POST /v1/sessions.") : null,
    h("ol", { class: "timeline" }, page.items.map((s) => h("li", { testid: "session-row", "data-session": s.session_id },
      h("span", { class: "when" }, time(s.started_at)),
      h("span", {}, link(route("users", user, "sessions", s.session_id), s.session_id, { testid: "session-link" })),
      stateBadge(s),
      h("span", { class: "muted" }, `${plural(s.blocks, "block")} · conversation ${s.conversation_id}`),
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
      end.addEventListener("click", () => act(status, {
        title: `End session “${s.session_id}”?`,
        body: "Its blocks stay readable and searchable; new writes and edits into it are refused from then on.",
        confirmLabel: "End session",
        run: () => post(`/v1/sessions/${enc(s.session_id)}/end`, {}),
        done: (r) => `Session ended at ${time(r.ended_at)}.`,
        then: refresh,
      }));
      actions.append(end);
    }
    const remove = h("button", { type: "button", class: "danger", testid: "delete-session" }, "Delete this session");
    remove.addEventListener("click", () => act(status, {
      title: `Delete session “${s.session_id}”?`,
      body: `The session and its ${plural(s.blocks, "block")} are deleted for good, with their vectors, facts and jobs.`,
      confirmLabel: "Delete session",
      run: () => del(`/v1/sessions/${enc(s.session_id)}`),
      done: (r) => `Session “${s.session_id}” deleted with ${plural(r.blocks_deleted, "block")}.`,
      then: () => leaveFor(route("users", user)),
    }));
    actions.append(remove);
  }
  const editor = !me.admin && !s.ended ? sessionEditSection(s, status) : null;
  const rows = exchangeRows(blocks.items).map(({ block: b, perspectives }) => h("tr", { testid: "block-row", "data-block": b.block_id },
    h("td", {}, h("span", { class: "when" }, time(b.time))),
    h("td", { class: "num" }, b.kind === "fact" ? "" : num(b.exchange_index)),
    h("td", {}, b.kind || "exchange"),
    h("td", { testid: "block-perspectives" }, b.kind === "fact" ? "" : perspectives.join(", ")),
    h("td", { class: "message-cell" }, link(route("users", user, "blocks", b.block_id), excerpt(b.message), { testid: "block-link" })),
    h("td", {}, statusBadge(b.extraction_status))));
  clear(view,
    h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, link(route("users", user), user), " / session"),
    h("h1", {}, `Session ${s.session_id}`),
    facts([
      ["State", h("span", { testid: "session-state" }, stateBadge(s))],
      ["Started", time(s.started_at)],
      ["Conversation", s.conversation_id],
      ["Blocks", num(s.blocks), "session-blocks-count"],
      ["Annotations", annotationText(s.annotations), "session-annotations"],
      ["Metadata", Object.keys(s.metadata || {}).length ? JSON.stringify(s.metadata) : "", "session-metadata"],
      ["Default TTL of its blocks", ttlText(s.default_ttl_s), "session-default-ttl"],
    ]),
    me.admin ? adminWritesNote(user) : null,
    actions, status,
    !me.admin && !s.ended ? ttlForm(s, status) : null,
    editor,
    h("section", { testid: "session-blocks" },
      h("h2", {}, "Blocks in order"),
      blocks.total === 0 ? notice("info", NO_MEMORIES) : null,
      table(`Blocks ${num(blocks.total ? blocks.offset + 1 : 0)}–${num(blocks.offset + blocks.items.length)} of ${num(blocks.total)}`,
        ["Event time", "Exchange", "Kind", "Perspectives", "Message", "Extraction"], rows, { testid: "blocks" }),
      pager(blocks.total, blocks.offset, BLOCKS_PAGE, (o) => withQuery(route("users", user, "sessions", sessionId), { offset: o }))));
}

// A TTL for every block of the session at once (POST /v1/memories/ttl): each block's clock restarts now.
function ttlForm(s, status) {
  const ttl = h("input", { type: "number", name: "ttl_s", min: 0, required: true, testid: "session-ttl" });
  const form = h("form", { class: "inline" },
    field("TTL of all its blocks, in seconds", ttl, "From now; 86400 is a day; 0: they never expire."),
    h("button", { type: "submit" }, "Set TTL"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const seconds = Number(ttl.value);
    act(status, {
      title: "Set a TTL for every block of this session?",
      body: seconds === 0 ? "Its blocks will never expire." : `Each of its blocks expires ${duration(seconds)} from now and is then invisible to every read.`,
      confirmLabel: "Set TTL",
      run: () => post("/v1/memories/ttl", { ttl_s: seconds, session_id: s.session_id }),
      done: (r) => `${plural(r.changed, "block")} got the new TTL (${seconds === 0 ? "never expire" : duration(seconds)}).`,
      then: refresh,
    });
  });
  return form;
}
