// The search playground: the same search as POST /v1/search, with each hit's explanation (what its score
// measures, each retriever's rank, own score and margin, the context gains and the time phrase it matched),
// and the same query as a curl line to copy.

import { ApiError, API_ROOT, enc, post } from "../api.js";
import { capabilities } from "../caps.js";
import { clear, copyButton, field, h, link, notice, plural, route, shellQuote, table, time, withQuery } from "../dom.js";
import { excerpt } from "./user.js";

// Each search mode (a preset of the server's search settings) and what it does.
export const MODES = [
  ["hybrid", "The default: the vector and keyword retrievers' scores fused, then gains from the hit's session, its neighbouring exchanges, its session's words and the query's time phrases (“two weeks ago”); a newer block that restates an older one moves just above it."],
  ["vector", "By meaning alone: the cosine similarity of the query's and the block's vectors."],
  ["keyword", "By words alone: BM25 over the blocks' words."],
  ["hybrid-rrf", "Plain reciprocal-rank fusion of vector and keyword, no context: the older default, for comparison."],
  ["hybrid-rank", "Weighted reciprocal-rank fusion with mild session and neighbour context (the default before score fusion)."],
  ["hybrid-no-time", "The default without the time gain: time phrases in the query change nothing."],
  ["hybrid-no-supersede", "The default without moving a newer restatement above the older one."],
  ["hybrid-no-words", "The default without the session-words and time gains."],
  ["hybrid-fusion", "Score fusion of vector and keyword only: no context gains."],
  ["hybrid-session", "Score fusion with the session gain only."],
  ["hybrid-context", "Reciprocal-rank fusion with heavier session and neighbour context."],
  ["vector-messages", "As vector, over the messages only (not the extracted facts)."],
  ["keyword-messages", "As keyword, over the messages only."],
  ["hybrid-messages", "As hybrid, over the messages only."],
];

const SCORE_KINDS = {
  cosine: "cosine similarity of the query's and the block's vectors (-1 to 1)",
  bm25: "BM25 keyword score (0 and up)",
  fusion: "fused score of the retrievers: orders this search's hits, not comparable across searches",
  rrf: "reciprocal-rank fusion of the retrievers: orders this search's hits, not comparable across searches",
};

// What each retriever's own score is.
const RETRIEVER_SCORES = { vector: "cosine", keyword: "BM25" };

// The context gains of an explanation: field, label, what earns it.
const GAINS = [
  ["session_gain", "session", "the best candidates of its session"],
  ["neighbour_gain", "neighbours", "the best candidate among its neighbouring exchanges"],
  ["words_gain", "session words", "its session's rank by the words of the people in it"],
  ["time_gain", "time", "its event time lies in a window of the query's time phrases"],
];

// The filters of a server with the memory model: address parameter, request field, label, hint.
const LIST_FILTERS = [
  ["sessions", "sessions", "Sessions", "Session ids, comma-separated. Empty: all of the user's."],
  ["block_ids", "block_ids", "Block ids", "Comma-separated."],
];
const TEXT_FILTERS = [
  ["ingested_after", "ingested_after", "Written from", "Ingest time: only blocks written at or after this."],
  ["ingested_before", "ingested_before", "Written before", "Ingest time: only blocks written before this."],
  ["prompt_id", "prompt_id", "Extraction prompt", "Only blocks extracted by this registry prompt."],
];

function splitList(value) {
  return value.split(",").map((x) => x.trim()).filter(Boolean);
}

function annotationPairs(value) {
  const out = {};
  for (const part of splitList(value.replace(/\n/g, ","))) {
    const at = part.indexOf("=");
    out[at < 0 ? part : part.slice(0, at).trim()] = at < 0 ? "" : part.slice(at + 1).trim();
  }
  return out;
}

// The request body for the form's values: only what was given, numbers as numbers.
export function searchBody(query, explain = false) {
  const body = { query: query.get("q") || "" };
  const k = query.get("k");
  if (k) body.k = Number(k);
  for (const name of ["mode", "at", "after", "before"]) if (query.get(name)) body[name] = query.get(name);
  for (const [param, name] of LIST_FILTERS) if (query.get(param)) body[name] = splitList(query.get(param));
  for (const [param, name] of TEXT_FILTERS) if (query.get(param)) body[name] = query.get(param);
  if (query.get("prompt_version")) body.prompt_version = Number(query.get("prompt_version"));
  if (query.get("annotations")) body.annotations = annotationPairs(query.get("annotations"));
  if (query.get("annotation_filter") === "post") body.annotation_filter = "post";
  if (query.get("kind")) body.kinds = [query.get("kind")];
  if (explain) body.explain = true;
  return body;
}

// The filters, folded away on a narrow screen unless one is set (they would push the hits off it).
function filterFields(query) {
  const inputs = {};
  const text = (param, attrs = {}) => {
    inputs[param] = h("input", { type: "text", name: param, value: query.get(param) || "", testid: `filter-${param}`, ...attrs });
    return inputs[param];
  };
  inputs.annotation_filter = h("select", { name: "annotation_filter", testid: "filter-annotation_filter" },
    h("option", { value: "pre", selected: query.get("annotation_filter") !== "post" }, "before the top-k cut"),
    h("option", { value: "post", selected: query.get("annotation_filter") === "post" }, "after it (on the k hits)"));
  inputs.kind = h("select", { name: "kind", testid: "filter-kind" },
    ["", "exchange", "fact"].map((k) => h("option", { value: k, selected: (query.get("kind") || "") === k }, k || "any")));
  const params = [...LIST_FILTERS.map(([p]) => p), "annotations", "kind", ...TEXT_FILTERS.map(([p]) => p), "prompt_version"];
  const set = params.filter((p) => query.get(p)).length;
  const wide = window.matchMedia("(min-width: 641px)").matches;
  const node = h("details", { class: "filters", testid: "filters", open: wide || set > 0 },
    h("summary", {}, set ? `Filters (${set} set)` : "Filters"),
    h("div", { class: "row" },
      LIST_FILTERS.map(([param, , label, hint]) => field(label, text(param), hint)),
      field("Annotations", text("annotations"), "key=value, comma-separated: every pair must match."),
      field("Annotations checked", inputs.annotation_filter),
      field("Kind", inputs.kind),
      TEXT_FILTERS.map(([param, , label, hint]) => field(label, text(param), hint)),
      field("Prompt version", text("prompt_version", { type: "number", min: 0 }))));
  return { node, inputs };
}

// Every value from the page is one shell word: the URL holds the user's id (o'brien), the body the query.
export function curlLine(me, user, body) {
  const target = me.admin ? new URL(`v1/users/${enc(user)}/search`, API_ROOT) : new URL("v1/search", API_ROOT);
  const keyVar = me.admin ? "$MEMLANE_ADMIN_KEY" : "$MEMLANE_KEY";
  return `curl -s -X POST -H "Authorization: Bearer ${keyVar}" -H 'Content-Type: application/json' ${shellQuote(target.href)} -d ${shellQuote(JSON.stringify(body))}`;
}

export async function searchPage(view, { parts, query, me }) {
  const user = parts[1];
  const q = h("input", { type: "search", name: "q", value: query.get("q") || "", required: true, testid: "query" });
  const chosen = query.get("mode") || "hybrid";
  const mode = h("select", { name: "mode", testid: "mode" }, MODES.map(([m]) => h("option", { value: m, selected: chosen === m }, m)));
  const modeHelp = h("span", { class: "hint", id: "mode-help", testid: "mode-help" });
  const describe = () => { modeHelp.textContent = (MODES.find(([m]) => m === mode.value) || [, ""])[1]; };
  mode.setAttribute("aria-describedby", "mode-help");
  mode.addEventListener("change", describe);
  describe();
  const k = h("input", { type: "number", name: "k", min: 1, max: 1000, value: query.get("k") || "10", testid: "k" });
  const at = h("input", { type: "text", name: "at", value: query.get("at") || "", placeholder: "now", testid: "at" });
  const after = h("input", { type: "text", name: "after", value: query.get("after") || "", testid: "after" });
  const before = h("input", { type: "text", name: "before", value: query.get("before") || "", testid: "before" });
  const form = h("form", { class: "search-form", role: "search", testid: "search-form" },
    field("Query", q),
    h("div", { class: "row" },
      h("div", { class: "field mode-field" }, h("label", { for: "mode" }, "Mode"), Object.assign(mode, { id: "mode" }), modeHelp,
        h("details", { class: "modes" }, h("summary", {}, "All the modes"),
          h("dl", { class: "facts", testid: "modes" }, MODES.map(([m, what]) => [h("dt", { class: "mono" }, m), h("dd", {}, what)])))),
      field("Hits (k)", k),
      field("Asked at", at, "When the question is asked; “two weeks ago” is read against it. Empty: now."),
      field("Event time from", after, "Only blocks at or after this time."),
      field("Event time before", before, "Only blocks before this time.")),
    h("button", { type: "submit", class: "primary" }, "Search"));
  const caps = await capabilities();
  const filters = caps.searchFields.has("sessions") ? filterFields(query) : null;
  if (filters) form.insertBefore(filters.node, form.lastChild);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const extra = {};
    if (filters) for (const [param, input] of Object.entries(filters.inputs)) extra[param] = input.value.trim();
    if (extra.annotation_filter === "pre") delete extra.annotation_filter;
    location.hash = withQuery(route("users", user, "search"), {
      q: q.value, mode: mode.value, k: k.value, at: at.value.trim(), after: after.value.trim(), before: before.value.trim(),
      ...extra,
    });
  });
  const results = h("section", { "aria-labelledby": "results-h", testid: "results" });
  clear(view,
    h("p", { class: "crumbs" }, link(route("users", user), user), " / search"),
    h("h1", {}, `Search ${user}'s memory`),
    form, results);
  if (!query.get("q")) return;

  const body = searchBody(query, caps.searchFields.has("explain"));
  const path = `/v1/users/${enc(user)}/search`;
  let hits;
  try {
    hits = await post(path, body);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) throw err;
    clear(results, h("h2", { id: "results-h" }, "No results"), notice("error", err.describe ? err.describe() : err.message, "search-error"));
    return;
  }
  const curl = h("input", { type: "text", readonly: true, value: curlLine(me, user, body), class: "mono wide", testid: "curl" });
  const rankOf = new Map(hits.map((hit, i) => [hit.block_id, i + 1]));
  clear(results,
    h("h2", { id: "results-h" }, plural(hits.length, "hit")),
    hits.length ? h("p", { class: "muted", testid: "score-kind" }, `Score: ${SCORE_KINDS[hits[0].score_kind] || hits[0].score_kind}.`)
      : notice("info", "Nothing matched. Another mode or fewer filters may find something; a user with no memories yet finds nothing (their page says how to add some).", "no-hits"),
    h("ol", { class: "hits" }, hits.map((hit, i) => hitItem(user, hit, i, rankOf))),
    h("div", { class: "curl" }, field("The same search with curl", curl), copyButton(curl)));
}

// Links to blocks by id, each with its place among these hits when it is one of them.
function blockLinks(user, ids, rankOf) {
  return ids.map((id, j) => [j ? ", " : "", link(route("users", user, "blocks", id), rankOf.has(id) ? `#${rankOf.get(id)} (${id})` : id)]);
}

function hitItem(user, hit, i, rankOf) {
  const ranks = Object.entries(hit.ranks).sort((a, b) => a[1] - b[1]);
  const moved = hit.supersedes || (hit.explanation ? hit.explanation.supersedes : []);
  return h("li", { class: "hit", testid: "hit", "data-block": hit.block_id },
    h("div", { class: "hit-head" },
      h("span", { class: "rank" }, `#${i + 1}`),
      h("span", { testid: "hit-score" }, `${hit.score.toFixed(4)} ${hit.score_kind}`),
      h("span", { class: "when" }, time(hit.time)),
      h("span", {}, `session ${hit.session_id} · ${hit.perspective}`),
      moved.length ? h("span", { class: "badge queued", testid: "hit-moved-badge" }, "moved up") : null),
    moved.length
      ? h("p", { testid: "hit-supersedes" }, "Moved up above ", blockLinks(user, moved, rankOf),
        ": it restates what they say and is newer, so it ranks just above them whatever their scores.")
      : null,
    h("p", { class: "hit-text", testid: "hit-message" }, excerpt(hit.message, 400)),
    h("p", { class: "why", testid: "hit-why" }, ranks.length
      ? ["Why: ", ranks.map(([name, r], j) => [j ? ", " : "", h("span", { testid: "hit-rank", "data-retriever": name }, `${name} rank ${r}`)])]
      : "Why: no retriever ranks were reported."),
    hit.explanation ? explanation(user, hit, i) : null,
    hit.other_perspectives.length ? h("p", { class: "muted" }, `Also stored from ${plural(hit.other_perspectives.length, "other perspective")}.`) : null,
    hit.superseded_by && hit.superseded_by.length
      ? h("p", { testid: "hit-newer" }, "A newer block restates this one and was moved above it: ", blockLinks(user, hit.superseded_by, rankOf), ".")
      : null,
    h("p", {}, link(route("users", user, "blocks", hit.block_id), "Open the block")));
}

function num(x) {
  return x.toFixed(4);
}

// Where the score comes from, line by line: each retriever (rank, own score, what it added), the fused
// score, each context gain earned, the total.
function explanation(user, hit, i) {
  const e = hit.explanation;
  const row = (part, rank, score, adds, why, testid, name) =>
    h("tr", { testid, "data-part": name }, h("th", { scope: "row" }, part), h("td", {}, rank), h("td", {}, score), h("td", { testid: "adds" }, adds), h("td", {}, why));
  const rows = e.retrievers.map((p) => row(p.retriever, String(p.rank), `${num(p.score)} ${RETRIEVER_SCORES[p.retriever] || ""}`.trim(),
    num(p.margin), hit.score_kind === "rrf" ? "weight / (rrf_k + rank)" : hit.score_kind === "fusion" ? "weighted margin above its lowest candidate, relative to its best" : "its own score",
    "why-retriever", p.retriever));
  rows.push(row("fused", "", "", num(e.fused), "the retrievers' shares added", "why-fused", "fused"));
  for (const [key, label, what] of GAINS) {
    if (e[key] > 0) {
      const why = key === "time_gain" && e.time_phrases.length ? `${what}: “${e.time_phrases.join("”, “")}”` : what;
      rows.push(row(`+ ${label}`, "", "", num(e[key]), why, "why-gain", key));
    }
  }
  rows.push(row("= score", "", "", num(hit.score), "", "why-total", "score"));
  return h("details", { class: "explain", testid: "hit-explanation", open: i === 0 },
    h("summary", {}, "Where the score comes from"),
    table(`Hit ${i + 1}: each part of its score`, ["Part", "Rank", "Own score", "Adds", "Because"], rows),
    e.time_phrases.length && !(e.time_gain > 0)
      ? h("p", { class: "muted" }, `Its time matches “${e.time_phrases.join("”, “")}”.`) : null);
}
