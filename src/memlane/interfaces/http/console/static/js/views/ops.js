// Operations: the health of store, embedder and queue; the extraction queue with its last errors and the
// re-queue of dead jobs (admin); the retention default (admin).

import { enc, get, post } from "../api.js";
import { capabilities } from "../caps.js";
import { act, ago, clear, facts, h, link, notice, route, statusRegion, table, time } from "../dom.js";
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
  const [prompts, llm] = await Promise.all([
    caps.has("GET /v1/prompts") ? promptSection() : null,
    caps.has("GET /v1/llm") ? llmSection(me) : null,
  ]);
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
    table("Components", ["Component", "State", "Detail"], ["store", "embedder", "queue"].map((n) => component(n, healthz[n]))
      .concat(healthz.llm ? [component("llm (information: never unhealthy)", healthz.llm)] : []), { testid: "health" }),
    llm,
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
      ["Outage", outage ? `${outage.jobs} jobs waiting ${ago(outage.waiting_s)}: ${outage.last_error}` : "none", "llm-outage"],
    ]),
    probe, result);
}
