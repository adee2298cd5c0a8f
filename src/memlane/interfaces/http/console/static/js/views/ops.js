// Operations: the health of store, embedder and queue; the extraction queue with its last errors and the
// re-queue of dead jobs (admin); the retention default (admin).

import { get, post } from "../api.js";
import { act, ago, clear, facts, h, link, route, statusRegion, table } from "../dom.js";
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
    retention ? h("section", { "aria-labelledby": "ret-h" },
      h("h2", { id: "ret-h" }, "Retention"),
      h("p", {}, `Default policy: ${policyText(retention.default)}; ${Object.keys(retention.users).length} users have their own.`)) : null);
}
