// Operations: the health of store, embedder and queue; the extraction queue with its last errors and the
// re-queue of dead jobs (admin); the retention default (admin).

import { enc, get, post } from "../api.js";
import { capabilities } from "../caps.js";
import { act, ago, clear, facts, h, link, notice, num, plural, refresh, route, statusRegion, table, time } from "../dom.js";
import { excerpt } from "./user.js";
import { pathless, policyText } from "./users.js";

// Each failed block's text, for its link: one read of each (they are few), gone if it was deleted since.
async function failedBlocks(errors) {
  const read = (e) => (pathless(e.user) ? null : get(`/v1/users/${enc(e.user)}/memories/${enc(e.block_id)}`).then((b) => b, () => null));
  const blocks = await Promise.all(errors.map(read));
  return new Map(errors.map((e, i) => [e.block_id, blocks[i]]));
}

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
  const texts = await failedBlocks(queue.last_errors);
  const [prompts, llm] = await Promise.all([
    caps.has("GET /v1/prompts") ? promptSection() : null,
    caps.has("GET /v1/llm") ? llmSection(me) : null,
  ]);
  const status = statusRegion();
  const requeue = me.admin && queue.dead > 0
    ? h("button", { type: "button", testid: "requeue-dead" }, `Re-queue ${plural(queue.dead, "dead job")}`)
    : null;
  if (requeue) {
    requeue.addEventListener("click", () => act(status, {
      title: "Run the dead jobs again?",
      body: `${plural(queue.dead, "extraction job")} that failed for good will be queued again with their attempts reset.`,
      confirmLabel: "Re-queue",
      run: () => post("/v1/queue/retry", { dead_only: true }),
      done: (r) => `${plural(r.dead, "dead job")} queued again.`,
      then: refresh,
    }));
  }
  const outage = queue.llm_outage;
  const errors = queue.last_errors.map((e) => {
    const b = texts.get(e.block_id);
    const name = b ? excerpt(b.message, 80) : `block ${e.block_id}${pathless(e.user) ? "" : " (deleted since)"}`;
    return h("tr", { testid: "error-row", "data-block": e.block_id },
      h("td", {}, time(e.at)),
      h("td", {}, e.user),
      h("td", {}, b ? [link(route("users", e.user, "blocks", e.block_id), name, { testid: "error-block" }), h("span", { class: "muted" }, ` (${b.perspective})`)] : name),
      h("td", {}, e.status),
      h("td", { class: "num" }, num(e.attempts)),
      h("td", {}, e.error));
  });
  clear(view,
    h("h1", {}, me.admin ? "Operations" : "Extraction queue"),
    h("h2", {}, "Health"),
    h("p", { testid: "health-status" }, `The service is ${healthz.status}.`),
    table("Components", ["Component", "State", "Detail"], ["store", "embedder", "queue"].map((n) => component(n, healthz[n]))
      .concat(healthz.llm ? [component("llm (information: never unhealthy)", healthz.llm)] : []), { testid: "health" }),
    llm,
    h("h2", {}, "Extraction queue"),
    me.admin ? null : h("p", { class: "muted" }, "The counts are the whole service's; the errors are your own."),
    facts([
      ["Queued", num(queue.queued), "queue-queued"],
      ["Running", num(queue.running), "queue-running"],
      ["Done", num(queue.done), "queue-done"],
      ["Dead", num(queue.dead), "queue-dead"],
      ["Oldest queued", ago(queue.oldest_queued_age_s)],
      ["Throughput", `${queue.throughput_per_min} jobs/min`],
      ["LLM outage", outage ? `${plural(outage.jobs, "job")} waiting ${ago(outage.waiting_s)}: ${outage.last_error}` : "none"],
    ]),
    requeue, status,
    queue.last_errors.length ? null : notice("info", "No extraction has failed.", "no-errors"),
    table("The last errors", ["When", "User", "Block", "Status", "Attempts in its last run", "Error"], errors, { testid: "errors" }),
    prompts,
    retention ? h("section", { "aria-labelledby": "ret-h" },
      h("h2", { id: "ret-h" }, "Retention"),
      h("p", {}, `Default policy: ${policyText(retention.default)}; ${plural(Object.keys(retention.users).length, "user has", "users have")} their own.`)) : null);
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
      h("td", { class: "num" }, num(p.current_version)),
      h("td", { class: "num" }, num(p.version_count)),
      h("td", {}, p.archived ? "archived" : "active"),
      h("td", {}, time(p.updated_at)),
      h("td", {}, show, versions));
  });
  return h("section", { "aria-labelledby": "prompts-h" },
    h("h2", { id: "prompts-h" }, `Extraction prompts (${num(page.total)})`),
    table("The prompt registry", ["Prompt", "Description", "Current version", "Versions", "State", "Updated", ""], rows, { testid: "prompts" }));
}

// The LLM (servers with GET /v1/llm): configured or not, its model, the queue's outage; for the admin, where it
// is and a probe on request (one GET of its list of models, never a completion: probing costs nothing).
async function llmSection(me) {
  const info = await get("/v1/llm");
  const result = h("div", { testid: "llm-probe" });
  const probe = me.admin && info.configured
    ? h("button", { type: "button", testid: "probe-llm" }, "Probe the LLM now")
    : null;
  if (probe) {
    probe.addEventListener("click", async () => {
      probe.disabled = true;
      clear(result, notice("info", "Asking the LLM's server…"));
      try {
        const p = (await get("/v1/llm", { probe: "true" })).probe;
        const listed = p.model_listed === null ? "" : p.model_listed ? "; the model is listed" : "; the model is NOT in its list";
        clear(result, notice(p.ok ? "ok" : "error",
          p.ok ? `The LLM answered in ${p.latency_ms} ms${listed}.` : `The LLM failed the probe: ${p.error_kind}${p.status ? ` (HTTP ${p.status})` : ""} after ${p.latency_ms} ms.`,
          p.ok ? "llm-probe-ok" : "llm-probe-failed"),
        h("p", { class: "muted mono" }, p.detail));
      } catch (err) {
        clear(result, notice("error", `The probe could not be asked: ${err.describe ? err.describe() : err.message}`, "llm-probe-failed"));
      } finally {
        probe.disabled = false;
      }
    });
  }
  const outage = info.outage;
  return h("section", { "aria-labelledby": "llm-h", testid: "llm" },
    h("h2", { id: "llm-h" }, "LLM"),
    facts([
      ["Configured", info.configured ? "yes" : "no: this server runs no extraction (a separate worker may)", "llm-configured"],
      info.configured ? ["Provider and model", `${info.provider} · ${info.model}`, "llm-model"] : null,
      me.admin && info.endpoint ? ["Endpoint", h("span", { class: "mono" }, info.endpoint), "llm-endpoint"] : null,
      ["Outage", outage ? `${plural(outage.jobs, "job")} waiting ${ago(outage.waiting_s)}: ${outage.last_error}` : "none", "llm-outage"],
    ]),
    probe, result);
}
