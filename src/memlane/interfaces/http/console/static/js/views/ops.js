// Operations: the health of store, embedder and queue; the extraction queue with its last errors and the
// re-queue of dead jobs (admin); the retention default (admin).

import { enc, get, post } from "../api.js";
import { capabilities } from "../caps.js";
import { act, ago, clear, facts, h, link, route, statusRegion, table, time } from "../dom.js";
import { policyText } from "./users.js";

async function health() {
  // /healthz answers 503 with the same body when a component fails: read it either way.
  const res = await fetch(new URL("healthz", new URL("../", document.baseURI)), { cache: "no-store", credentials: "omit" });
  return res.json();
}

function component(name, c) {
  const detail = Object.entries(c.detail || {}).filter(([, v]) => typeof v !== "object" || v === null)
    .map(([k, v]) => `${k}: ${v}`).join(", ");
  return h("tr", { testid: "health-row" },
    h("th", { scope: "row" }, name),
    h("td", {}, h("span", { class: `badge ${c.ok ? "ok" : "failed"}` }, c.ok ? "ok" : "failing")),
    h("td", {}, detail));
}

export async function opsPage(view, { me }) {
  const [queue, healthz, retention] = await Promise.all([get("/v1/queue"), health(), me.admin ? get("/v1/retention") : null]);
  const caps = await capabilities();
  const prompts = caps.has("GET /v1/prompts") ? await promptSection() : null;
  const status = statusRegion();
  const requeue = me.admin && queue.dead > 0
    ? h("button", { type: "button", testid: "requeue-dead" }, `Re-queue ${queue.dead} dead jobs`)
    : null;
  if (requeue) {
    requeue.addEventListener("click", async () => {
      const done = await act(status, {
        title: "Run the dead jobs again?",
        body: `${queue.dead} extraction jobs that failed for good are queued again with their attempts reset.`,
        confirmLabel: "Re-queue",
        run: () => post("/v1/queue/retry", { dead_only: true }),
        done: (r) => `${r.dead} dead jobs queued again.`,
      });
      if (done) requeue.remove();
    });
  }
  const outage = queue.llm_outage;
  const errors = queue.last_errors.map((e) => h("tr", { testid: "error-row" },
    h("td", {}, new Date(e.at * 1000).toISOString().replace("T", " ").slice(0, 19)),
    h("td", {}, link(route("users", e.user, "blocks", e.block_id), e.user)),
    h("td", {}, e.status),
    h("td", { class: "num" }, String(e.attempts)),
    h("td", {}, e.error)));
  clear(view,
    h("h1", {}, me.admin ? "Operations" : "Extraction queue"),
    h("h2", {}, "Health"),
    h("p", { testid: "health-status" }, `The service is ${healthz.status}.`),
    table("Components", ["Component", "State", "Detail"], ["store", "embedder", "queue"].map((n) => component(n, healthz[n])), { testid: "health" }),
    h("h2", {}, "Extraction queue"),
    me.admin ? null : h("p", { class: "muted" }, "The counts are the whole service's; the errors are your own."),
    facts([
      ["Queued", String(queue.queued), "queue-queued"],
      ["Running", String(queue.running), "queue-running"],
      ["Done", String(queue.done), "queue-done"],
      ["Dead", String(queue.dead), "queue-dead"],
      ["Oldest queued", ago(queue.oldest_queued_age_s)],
      ["Throughput", `${queue.throughput_per_min} jobs/min`],
      ["LLM outage", outage ? `${outage.jobs} jobs waiting ${ago(outage.waiting_s)}: ${outage.last_error}` : "none"],
    ]),
    requeue, status,
    table("The last errors", ["When (UTC)", "User", "Status", "Attempts", "Error"], errors, { testid: "errors" }),
    prompts,
    retention ? h("section", { "aria-labelledby": "ret-h" },
      h("h2", { id: "ret-h" }, "Retention"),
      h("p", {}, `Default policy: ${policyText(retention.default)}; ${Object.keys(retention.users).length} users have their own.`)) : null);
}

// The prompt registry: each prompt's head, and its versions on request (newest first, as the API pages them).
async function promptSection() {
  const page = await get("/v1/prompts", { limit: 50, include_archived: true });
  const rows = page.items.map((p) => {
    const versions = h("div", { testid: "prompt-versions" });
    const show = h("button", { type: "button", class: "small", "aria-expanded": "false" }, `Versions of ${p.prompt_id}`);
    show.addEventListener("click", async () => {
      if (show.getAttribute("aria-expanded") === "true") {
        clear(versions);
        show.setAttribute("aria-expanded", "false");
        return;
      }
      const list = await get(`/v1/prompts/${enc(p.prompt_id)}/versions`, { limit: 50 });
      clear(versions, h("ol", { class: "versions" }, list.items.map((v) => h("li", {},
        h("p", {}, `version ${v.version}${v.is_current ? " (current)" : ""}${v.archived ? " (archived)" : ""} · ${time(v.created_at)}`),
        h("pre", { class: "message" }, v.text)))));
      show.setAttribute("aria-expanded", "true");
    });
    return h("tr", { testid: "prompt-row", "data-prompt": p.prompt_id },
      h("th", { scope: "row", class: "mono" }, p.prompt_id),
      h("td", {}, p.description),
      h("td", { class: "num" }, String(p.current_version)),
      h("td", { class: "num" }, String(p.version_count)),
      h("td", {}, p.archived ? "archived" : "active"),
      h("td", {}, time(p.updated_at)),
      h("td", {}, show, versions));
  });
  return h("section", { "aria-labelledby": "prompts-h" },
    h("h2", { id: "prompts-h" }, `Extraction prompts (${page.total})`),
    table("The prompt registry", ["Prompt", "Description", "Current version", "Versions", "State", "Updated", ""], rows, { testid: "prompts" }));
}
