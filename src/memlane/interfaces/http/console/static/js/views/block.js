// One block: everything the API says of it, the message as plain text, and the actions its key may take.

import { del, enc, get, patch, post } from "../api.js";
import { capabilities } from "../caps.js";
import { act, clear, facts, field, h, link, route, statusRegion, time } from "../dom.js";
import { parseAnnotations } from "./edits.js";
import { statusBadge } from "./user.js";

export async function blockPage(view, { parts, me }) {
  const [, user, , blockId] = parts;
  const b = await get(`/v1/users/${enc(user)}/memories/${enc(blockId)}`);
  const status = statusRegion();
  let failure = null;
  if (b.extraction_status === "failed" || b.extraction_status === "queued") {
    const queue = await get("/v1/queue");
    failure = queue.last_errors.find((e) => e.block_id === b.block_id) || null;
  }
  const annotations = Object.entries(b.annotations || {});
  const actions = h("div", { class: "actions" });
  if (!me.admin) {
    const remove = h("button", { type: "button", class: "danger", testid: "delete-block" }, "Delete this block");
    remove.addEventListener("click", async () => {
      const done = await act(status, {
        title: "Delete this block?",
        body: "The block, its facts, vectors, keyword rows and extraction job are deleted for good.",
        confirmLabel: "Delete block",
        run: () => del(`/v1/memories/${enc(b.block_id)}`),
        done: () => "Block deleted.",
      });
      if (done) {
        clear(article, h("p", { testid: "block-deleted" }, `Block ${b.block_id} was deleted.`));
        remove.remove();
      }
    });
    actions.append(remove);
  }
  const caps = await capabilities();
  if (!me.admin && b.status === "extraction_failed" && caps.has("POST /v1/memories/{block_id}/requeue")) {
    const again = h("button", { type: "button", testid: "requeue-block" }, "Re-queue its extraction");
    again.addEventListener("click", async () => {
      const done = await act(status, {
        title: "Run this block's extraction again?",
        body: "Its failed extraction is queued again; a worker runs it when one is free.",
        confirmLabel: "Re-queue",
        run: () => post(`/v1/memories/${enc(b.block_id)}/requeue`, {}),
        done: (r) => `Extraction queued again (status: ${r.status}).`,
      });
      if (done) again.remove();
    });
    actions.append(again);
  }
  if (me.admin && b.extraction_status === "failed") {
    const requeue = h("button", { type: "button", testid: "requeue-block" }, "Re-queue its extraction");
    requeue.addEventListener("click", () => act(status, {
      title: "Run this block's extraction again?",
      body: "Its failed job is queued again with its attempts reset; a worker runs it when one is free.",
      confirmLabel: "Re-queue",
      run: () => post("/v1/queue/retry", { user, block_ids: [b.block_id] }),
      done: (r) => `${r.dead + r.waiting} job(s) queued again.`,
    }));
    actions.append(requeue);
  }
  const article = h("article", { testid: "block" },
    h("h2", {}, "Message"),
    h("pre", { class: "message", testid: "block-message" }, b.message),
    sides(b),
    h("h2", {}, "Summary and facts"),
    h("p", { testid: "block-summary" }, b.summary || h("span", { class: "muted" }, "no summary (extraction has not run)")),
    b.facts.length ? h("ul", { testid: "block-facts" }, b.facts.map((f) => h("li", {}, f))) : null,
    perspectives(b, user),
    h("h2", {}, "Details"),
    facts([
      ["Block id", h("span", { class: "mono" }, b.block_id)],
      ["Event time", `${b.time_annotation} (${time(b.time)})`, "block-time"],
      ["Ingested", time(b.ingest_time)],
      ["Conversation", b.conversation_id],
      ["Session", link(`${route("users", user)}?session=${enc(b.session_id)}`, b.session_id)],
      ["Exchange", String(b.exchange_index)],
      ["Perspective", `${b.perspective} (${b.mode})`],
      ["Extraction", [statusBadge(b.extraction_status), failure ? h("span", { testid: "block-failure" }, ` ${failure.error} (attempts: ${failure.attempts})`) : null]],
      ...modelFacts(b),
      ["Annotations", annotations.length ? h("ul", {}, annotations.map(([k, v]) => h("li", {}, `${k} = ${v}`))) : null],
      ["Message ids", b.message_ids.join(", ")],
      ["Content hash", h("span", { class: "mono" }, b.content_hash)],
    ]));
  const editor = !me.admin && caps.has("PATCH /v1/memories/{block_id}") ? editSection(b, status, view) : null;
  clear(view,
    h("p", { class: "crumbs" }, me.admin ? [link(route("users"), "Users"), " / "] : null, link(route("users", user), user), " / block"),
    h("h1", {}, `Block ${b.exchange_index} of session ${b.session_id}`),
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
  if (b.status) rows.push(["Status", b.fail_count ? `${b.status} (failed ${b.fail_count} times)` : b.status, "block-status"]);
  if ("expires_at" in b) rows.push(["Expires", b.expires_at ? time(b.expires_at) : "never", "block-expires"]);
  if ("ttl_s" in b) rows.push(["Own TTL", b.ttl_s === null ? "none (its session's, else the server's)" : `${b.ttl_s} s`]);
  if (b.updated_at) rows.push(["Updated", time(b.updated_at)]);
  if (b.prompt_id) rows.push(["Extraction prompt", `${b.prompt_id} version ${b.prompt_version ?? "current"}`, "block-prompt"]);
  if (b.last_queued_at) rows.push(["Last queued", time(b.last_queued_at)]);
  return rows;
}

// Edit in place (PATCH /v1/memories/{id}): the text (a fact's content, or an exchange's two sides), the
// annotations, the TTL. Only what changed is sent; the server embeds, indexes and extracts the new text.
function editSection(b, status, view) {
  const controls = [];
  const isFact = b.kind === "fact";
  const sides = Array.isArray(b.sides) && b.sides.length === 2 ? b.sides : null;
  let content = null;
  let userSide = null;
  let assistantSide = null;
  if (isFact) {
    content = h("textarea", { name: "content", rows: 3, testid: "edit-content" }, b.message);
    controls.push(field("Fact", content));
  } else if (sides) {
    userSide = h("textarea", { name: "user_content", rows: 3, testid: "edit-user" }, sides[0].content);
    assistantSide = h("textarea", { name: "assistant_content", rows: 3, testid: "edit-assistant" }, sides[1].content);
    controls.push(field(`${sides[0].role}'s side`, userSide), field(`${sides[1].role}'s side`, assistantSide));
  }
  const initialAnnotations = Object.entries(b.annotations || {}).map(([k, v]) => `${k}=${v}`).join("\n");
  const annotations = h("textarea", { name: "annotations", rows: 2, testid: "edit-annotations" }, initialAnnotations);
  const ttl = h("input", { type: "number", name: "ttl_s", min: 0, value: b.ttl_s ?? "", testid: "edit-ttl" });
  controls.push(field("Annotations", annotations, "key=value, one a line; they replace the block's."),
    field("TTL in seconds", ttl, "Restarts the block's clock from now; 0: never expires. Empty: unchanged."));
  const form = h("form", { class: "card", testid: "edit-form" }, controls, h("button", { type: "submit", class: "primary" }, "Save changes"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = {};
    if (content && content.value !== b.message) body.content = content.value;
    if (userSide && userSide.value !== sides[0].content) body.user_content = userSide.value;
    if (assistantSide && assistantSide.value !== sides[1].content) body.assistant_content = assistantSide.value;
    if (annotations.value.trim() !== initialAnnotations) {
      try {
        body.annotations = parseAnnotations(annotations.value);
      } catch (err) {
        clear(status, h("p", { class: "notice error", role: "alert", "data-testid": "action-error" }, `Nothing was changed: annotations: ${err.message}`));
        return;
      }
    }
    if (ttl.value !== "" && Number(ttl.value) !== b.ttl_s) body.ttl_s = Number(ttl.value);
    if (Object.keys(body).length === 0) {
      clear(status, h("p", { class: "notice info", role: "status" }, "Nothing to save: no field changed."));
      return;
    }
    const updated = await act(status, {
      title: "Save these changes?",
      body: `The block keeps its id; ${Object.keys(body).join(", ")} will be replaced${body.content || body.user_content || body.assistant_content ? ", and the new text embedded, indexed and extracted again" : ""}.`,
      confirmLabel: "Save",
      run: () => patch(`/v1/memories/${enc(b.block_id)}`, body),
      done: () => "Block updated.",
    });
    if (updated) {
      clear(view.querySelector("[data-testid=block-message]"), updated.message);
    }
  });
  return h("section", { "aria-labelledby": "edit-h" }, h("h2", { id: "edit-h" }, "Edit in place"), form);
}
