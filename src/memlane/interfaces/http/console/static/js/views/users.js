// Users (admin): every user with their blocks and retention policy; find by name; create one.

import { get, post } from "../api.js";
import { act, clear, field, h, link, pager, route, statusRegion, table, time, withQuery } from "../dom.js";

const PAGE = 50;

export function policyText(policy) {
  if (!policy) return "keeps everything";
  const rules = [];
  if (policy.max_age_days) rules.push(`${policy.max_age_days} days`);
  if (policy.max_blocks) rules.push(`${policy.max_blocks} newest blocks`);
  return rules.length ? `keeps ${rules.join(" and ")}` : "keeps everything";
}

export async function usersPage(view, { query }) {
  const [users, policies] = await Promise.all([get("/v1/users"), get("/v1/retention")]);
  const q = (query.get("q") || "").trim();
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const chosen = q ? users.filter((u) => u.user.toLowerCase().includes(q.toLowerCase())) : users;
  const shown = chosen.slice(offset, offset + PAGE);
  const status = statusRegion();

  const search = h("input", { type: "search", name: "q", value: q, testid: "user-filter" });
  const filter = h("form", { class: "inline", role: "search" }, field("Find users by name", search),
    h("button", { type: "submit" }, "Find"));
  filter.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = withQuery(route("users"), { q: search.value.trim() });
  });

  const name = h("input", { type: "text", name: "user", required: true, maxlength: 256, autocomplete: "off", testid: "new-user" });
  const create = h("form", { class: "inline" }, field("New user's name", name), h("button", { type: "submit" }, "Create user"));
  create.addEventListener("submit", async (e) => {
    e.preventDefault();
    const user = name.value;
    const done = await act(status, {
      title: "Create a user?",
      body: `A user named “${user}” will be created, with no memories and no keys.`,
      confirmLabel: "Create",
      run: () => post("/v1/users", { user }),
      done: (r) => (r.created ? `User “${r.user}” created.` : `User “${r.user}” already existed.`),
    });
    if (done) location.hash = route("users", user);
  });

  const defaultPolicy = policies.default;
  const rows = shown.map((u) => {
    const own = policies.users[u.user];
    return h("tr", { testid: "user-row", "data-user": u.user },
      h("th", { scope: "row" }, link(route("users", u.user), u.user)),
      h("td", { class: "num" }, String(u.blocks)),
      h("td", {}, time(u.created_at)),
      h("td", {}, own ? `own: ${policyText(own)}` : `default: ${policyText(defaultPolicy)}`));
  });
  clear(view,
    h("h1", {}, "Users"),
    h("p", { testid: "user-count" }, `${users.length} users; default retention ${policyText(defaultPolicy)}.`),
    h("div", { class: "toolbar" }, filter, create),
    status,
    table(q ? `Users whose name holds “${q}”` : "All users", ["User", "Blocks", "Created", "Retention"], rows, { testid: "users" }),
    pager(chosen.length, offset, PAGE, (o) => withQuery(route("users"), { q, offset: o })));
}
