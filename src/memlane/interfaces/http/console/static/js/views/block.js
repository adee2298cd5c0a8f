// One block: everything the API says of it, the message as plain text, and the actions its key may take.

import { del, enc, get, patch, post } from "../api.js";
import { capabilities } from "../caps.js";
import { act, clear, duration, facts, field, h, leaveFor, link, notice, num, plural, refresh, route, statusRegion, time, withQuery } from "../dom.js";
import { parseAnnotations } from "./edits.js";
import { adminWritesNote, statusBadge } from "./user.js";

// The block's state as one word, on a server with the memory model (status) or without (extraction_status).
function stateOf(b) {
  return b.status || { queued: "processing", failed: "extraction_failed" }[b.extraction_status] || "ready";
}

// What the summary line says when there is none: why, from the block's own status.
function noSummary(b) {
  const state = stateOf(b);
  if (state === "processing") return "No summary yet: its extraction is queued.";
  if (state === "extraction_failed") return "No summary: its extraction failed (see Extraction below).";
  if (b.extraction_status === "off") return "No summary: the block was stored without extraction.";
  return "The extraction found no summary.";
}

// The extraction's state, its failures and its last error in one line: the count is the block's own
// (fail_count), the error and its run's attempts the queue's last word on it.
function extractionLine(b, failure) {
  const state = stateOf(b);
  const fails = b.fail_count ? plural(b.fail_count, "time") : null;
  const words = {
    ready: b.extraction_status === "off" ? "ready (stored without extraction)" : "ready",
    processing: fails ? `processing: queued again after failing ${fails}` : "processing: queued",
    extraction_failed: fails ? `extraction failed ${fails}` : "extraction failed",
  }[state] || state;
  return [
    h("span", { testid: "block-status" }, words),
    failure ? h("span", { testid: "block-failure" },
      ` · last error (${time(failure.at)}, after ${plural(failure.attempts, "attempt")} in that run): ${failure.error}`) : null,
  ];
}

export async function blockPage(view, { parts, me }) {
  const [, user, , blockId] = parts;
  const b = await get(`/v1/users/${enc(user)}/memories/${enc(blockId)}`);
  const caps = await capabilities();
  const status = statusRegion();
  let failure = null;
  if (stateOf(b) !== "ready") {
    const queue = await get("/v1/queue");
    failure = queue.last_errors.find((e) => e.block_id === b.block_id) || null;
  }
  const sessions = caps.has("GET /v1/users/{user}/sessions/{session_id}");
  const sessionPage = sessions ? route("users", user, "sessions", b.session_id) : withQuery(route("users", user), { session: b.session_id });
  // An ended session's blocks cannot change: no edit form to fill in vain.
  const ended = sessions && (await get(`/v1/users/${enc(user)}/sessions/${enc(b.session_id)}`).then((x) => x.ended, () => false));
  const annotations = Object.entries(b.annotations || {});
  const actions = h("div", { class: "actions" });
  if (!me.admin) {
    const remove = h("button", { type: "button", class: "danger", testid: "delete-block" }, "Delete this block");
    remove.addEventListener("click", () => act(status, {
      title: "Delete this block?",
      body: "The block, its facts, vectors, keyword rows and extraction job are deleted for good.",
      confirmLabel: "Delete block",
      run: () => del(`/v1/memories/${enc(b.block_id)}`),
      done: () => `Block ${b.block_id} deleted.`,
      then: () => leaveFor(sessionPage),
    }));
    actions.append(remove);
  }
  if (!me.admin && stateOf(b) === "extraction_failed" && caps.has("POST /v1/memories/{block_id}/requeue")) {
    const again = h("button", { type: "button", testid: "requeue-block" }, "Re-queue its extraction");
    again.addEventListener("click", () => act(status, {
      title: "Run this block's extraction again?",
      body: "Its failed extraction is queued again; a worker runs it when one is free.",
      confirmLabel: "Re-queue",
      run: () => post(`/v1/memories/${enc(b.block_id)}/requeue`, {}),
      done: (r) => `Extraction queued again (status: ${r.status}).`,
      then: refresh,
    }));
    actions.append(again);
  }
  if (me.admin && stateOf(b) === "extraction_failed") {
    const requeue = h("button", { type: "button", testid: "requeue-block" }, "Re-queue its extraction");
    requeue.addEventListener("click", () => act(status, {
      title: "Run this block's extraction again?",
      body: "Its failed job is queued again with its attempts reset; a worker runs it when one is free.",
      confirmLabel: "Re-queue",
      run: () => post("/v1/queue/retry", { user, block_ids: [b.block_id] }),
      done: (r) => `${plural(r.dead + r.waiting, "job")} queued again.`,
      then: refresh,
    }));
    actions.append(requeue);
  }
  const article = h("article", { testid: "block" },
    h("h2", {}, "Message"),
    h("pre", { class: "message", testid: "block-message" }, b.message),
    sides(b),
    h("h2", {}, "Summary and facts"),
    h("p", { testid: "block-summary" }, b.summary || h("span", { class: "muted" }, noSummary(b))),
    b.facts.length ? h("ul", { testid: "block-facts" }, b.facts.map((f) => h("li", {}, f))) : null,
    perspectives(b, user),
    h("h2", {}, "Details"),
    facts([
      ["Block id", h("span", { class: "mono" }, b.block_id)],
      ["Event time", `${time(b.time)} (said as “${b.time_annotation}”)`, "block-time"],
      ["Ingested", time(b.ingest_time)],
      ["Conversation", b.conversation_id],
      ["Session", link(sessionPage, b.session_id, { testid: "block-session" })],
      ["Exchange", num(b.exchange_index)],
      ["Perspective", `${b.perspective} (${b.mode})`],
      ["Extraction", [statusBadge(b.extraction_status), " ", extractionLine(b, failure)], "block-extraction"],
      ...modelFacts(b),
      ["Annotations", annotations.length ? h("ul", {}, annotations.map(([k, v]) => h("li", {}, `${k} = ${v}`))) : null, "block-annotations"],
      ["Message ids", b.message_ids.join(", ")],
      ["Content hash", h("span", { class: "mono" }, b.content_hash)],
    ]));
  const editor = me.admin || !caps.has("PATCH /v1/memories/{block_id}") ? null
    : ended ? notice("info", `Its session ${b.session_id} has ended: its blocks stay readable and searchable, and can no longer be edited.`, "block-session-ended")
      : editSection(b, status);
  clear(view,
    h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, link(route("users", user), user), " / ",
      link(sessionPage, `session ${b.session_id}`), " / block"),
    h("h1", {}, b.kind === "fact" ? `Fact of session ${b.session_id}` : `Exchange ${num(b.exchange_index)} of session ${b.session_id}`),
    me.admin ? adminWritesNote(user) : null,
    actions, status, article, editor);
}

// The same exchange as its other sides saw it (dual and speakers modes store one block per perspective),
// from servers whose block route lists them; nothing for a single-perspective block or a fact.
function perspectives(b, user) {
  const others = b.other_perspectives;
  if (!Array.isArray(others) || (others.length === 0 && (b.mode === "single" || b.kind === "fact"))) return null;
  return h("section", { "aria-labelledby": "persp-h", testid: "perspectives" },
    h("h2", { id: "persp-h" }, "Other perspectives of this exchange"),
    others.length === 0
      ? h("p", { class: "muted" }, "None left: the others were deleted or have expired.")
      : h("ul", { class: "perspectives" }, others.map((o) => h("li", { testid: "perspective", "data-block": o.block_id },
        link(route("users", user, "blocks", o.block_id), o.perspective, { testid: "perspective-link" }), " · ",
        h("span", { class: `badge ${{ processing: "queued", extraction_failed: "failed" }[o.status] || "done"}` }, o.status), " ",
        o.summary ? h("span", { testid: "perspective-summary" }, o.summary) : h("span", { class: "muted" }, "no summary yet")))));
}

// An exchange stored as its two sides (servers with the memory model): each side as given.
function sides(b) {
  if (!Array.isArray(b.sides) || b.sides.length === 0) return null;
  return h("section", {}, h("h3", {}, "Its two sides, as given"), h("dl", { class: "facts sides", testid: "block-sides" },
    b.sides.map((side) => [h("dt", {}, side.role), h("dd", {}, h("pre", { class: "message" }, side.content))])));
}

// What a server with the memory model says beside the fields above; nothing on a server without it.
function modelFacts(b) {
  const rows = [];
  if (b.kind) rows.push(["Kind", b.kind, "block-kind"]);
  if ("expires_at" in b) rows.push(["Expires", b.expires_at ? time(b.expires_at) : "never", "block-expires"]);
  if ("ttl_s" in b) rows.push(["Own TTL", b.ttl_s === null ? "none (its session's, else the server's)" : b.ttl_s === 0 ? "never expires" : duration(b.ttl_s), "block-ttl"]);
  if (b.updated_at) rows.push(["Updated", time(b.updated_at)]);
  if (b.prompt_id) rows.push(["Extraction prompt", `${b.prompt_id} version ${b.prompt_version ?? "current"}`, "block-prompt"]);
  if (b.last_queued_at) rows.push(["Last queued", time(b.last_queued_at)]);
  return rows;
}

// An exchange stored from a message list keeps its text only ("role: content" a line): its two sides as the
// API takes them, the first role's lines and the other's.
function splitSides(message, roles) {
  const parts = [];
  for (const line of message.split("\n")) {
    const role = roles.find((r) => line.startsWith(`${r}: `));
    if (role !== undefined) parts.push([role, [line.slice(role.length + 2)]]);
    else if (parts.length) parts[parts.length - 1][1].push(line);
    else parts.push([null, [line]]);
  }
  const first = parts.length ? parts[0][0] : null;
  const second = parts.find(([role]) => role !== first)?.[0] ?? null;
  const texts = [[], []];
  for (const [role, lines] of parts) texts[role === first ? 0 : 1].push(lines.join("\n"));
  return { roles: [first, second], texts: texts.map((t) => t.join("\n")) };
}

// Edit in place (PATCH /v1/memories/{id}): the text (a fact's content, or an exchange's two sides), the
// annotations, the TTL. Only what changed is sent; the server embeds, indexes and extracts the new text, and
// the page is read again.
function editSection(b, status) {
  const controls = [];
  const isFact = b.kind === "fact";
  let content = null;
  let sideInputs = null;
  let given = null;  // the sides as the form starts with them
  let whole = false;  // an exchange without stored sides takes both at once
  if (isFact) {
    content = h("textarea", { name: "content", rows: 3, testid: "edit-content" }, b.message);
    controls.push(field("Fact", content));
  } else {
    let labels;
    if (Array.isArray(b.sides) && b.sides.length === 2) {
      given = b.sides.map((side) => side.content);
      labels = b.sides.map((side) => side.role);
    } else {
      const roles = [...new Set(["user", "assistant", b.perspective, ...(b.other_perspectives || []).map((o) => o.perspective)])];
      const split = splitSides(b.message, roles);
      given = split.texts;
      labels = [split.roles[0] || "user", split.roles[1] || "assistant"];
      whole = true;
    }
    sideInputs = [
      h("textarea", { name: "user_content", rows: 3, testid: "edit-user" }, given[0]),
      h("textarea", { name: "assistant_content", rows: 3, testid: "edit-assistant" }, given[1]),
    ];
    controls.push(
      field(`${labels[0]}'s side`, sideInputs[0], whole ? "Stored from a message list: both sides are sent together (user_content)." : null),
      field(`${labels[1]}'s side`, sideInputs[1], whole ? "… and this one as assistant_content." : null));
  }
  const initialAnnotations = Object.entries(b.annotations || {}).map(([k, v]) => `${k}=${v}`).join("\n");
  const annotations = h("textarea", { name: "annotations", rows: 2, testid: "edit-annotations" }, initialAnnotations);
  const ttl = h("input", { type: "number", name: "ttl_s", min: 0, value: b.ttl_s ?? "", testid: "edit-ttl" });
  controls.push(field("Annotations", annotations, "key=value, one a line; they replace the block's."),
    field("TTL in seconds", ttl, "Restarts the block's clock from now; 86400 is a day; 0: never expires. Empty: unchanged."));
  const form = h("form", { class: "card", testid: "edit-form" }, controls, h("button", { type: "submit", class: "primary" }, "Save changes"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {};
    if (content && content.value !== b.message) body.content = content.value;
    if (sideInputs) {
      const changed = sideInputs.map((input, i) => input.value !== given[i]);
      if (changed[0] || (whole && changed[1])) body.user_content = sideInputs[0].value;
      if (changed[1] || (whole && changed[0])) body.assistant_content = sideInputs[1].value;
    }
    if (annotations.value.trim() !== initialAnnotations) {
      try {
        body.annotations = parseAnnotations(annotations.value);
      } catch (err) {
        clear(status, notice("error", `Nothing was changed: annotations: ${err.message}`, "action-error"));
        return;
      }
    }
    if (ttl.value !== "" && Number(ttl.value) !== b.ttl_s) body.ttl_s = Number(ttl.value);
    if (Object.keys(body).length === 0) {
      clear(status, notice("info", "Nothing to save: no field differs from the block as stored.", "nothing-to-save"));
      return;
    }
    await act(status, {
      title: "Save these changes?",
      body: `The block keeps its id; ${Object.keys(body).join(", ")} will be replaced${body.content || body.user_content || body.assistant_content ? ", and the new text embedded, indexed and extracted again" : ""}.`,
      confirmLabel: "Save",
      run: () => patch(`/v1/memories/${enc(b.block_id)}`, body),
      done: () => "Block updated.",
      then: refresh,
    });
  });
  return h("section", { "aria-labelledby": "edit-h" }, h("h2", { id: "edit-h" }, "Edit in place"), form);
}
