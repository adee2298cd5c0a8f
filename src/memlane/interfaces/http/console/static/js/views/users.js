// Users (admin): every user with their blocks and retention policy; find by name; create one.

import { api, get, post } from "../api.js";
import { capabilities } from "../caps.js";
import { act, clear, field, h, link, notice, num, pager, plural, route, shellQuote, statusRegion, table, time, withQuery } from "../dom.js";

const PAGE = 50;

// A name no URL path can carry (a "/" splits the segment even encoded; "." and ".." are folders): stored by an
// older memlane, it is reached with the CLI, by name, and over HTTP with a key of its own.
export function pathless(user) {
  return user.includes("/") || user === "." || user === "..";
}

export function pathlessHelp(user) {
  const q = shellQuote(user);
  return `This user's id holds “/” (or is “.” or “..”), which no URL path can carry, so the console cannot open it. Names with these characters are refused now; this one was stored before. On the server's machine: memlane list ${q} reads it, memlane keys create ${q} makes it a key (which reads and searches it over /v1/memories and /v1/search), memlane delete-user ${q} deletes it.`;
}

export function policyText(policy) {
  if (!policy) return "keeps everything";
  const rules = [];
  if (policy.max_age_days) rules.push(plural(policy.max_age_days, "day"));
  if (policy.max_blocks) rules.push(`${plural(policy.max_blocks, "newest block")}`);
  return rules.length ? `keeps ${rules.join(" and ")}` : "keeps everything";
}

export async function usersPage(view, { query }) {
  const [caps, policies] = await Promise.all([capabilities(), get("/v1/retention")]);
  const q = (query.get("q") || "").trim();
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  let shown;
  let matching;
  let count;
  if (caps.usersPaged) {
    // The server pages the users (a page and X-Total-Count) and finds them by part of their id or display
    // name (q), or, on a server without it, by exact display name.
    const find = caps.usersByPart ? { q } : { name: q };
    const { data, headers } = await api("GET", "/v1/users", { query: { limit: PAGE, offset, ...find }, withHeaders: true });
    shown = data;
    matching = Number(headers.get("X-Total-Count") ?? data.length);
    count = !q ? plural(matching, "user") : caps.usersByPart ? `${plural(matching, "user")} matching “${q}”` : `${plural(matching, "user")} named “${q}”`;
  } else {
    const users = await get("/v1/users");
    const chosen = q ? users.filter((u) => u.user.toLowerCase().includes(q.toLowerCase())) : users;
    shown = chosen.slice(offset, offset + PAGE);
    matching = chosen.length;
    count = plural(users.length, "user");
  }
  const status = statusRegion();

  const search = h("input", { type: "search", name: "q", value: q, testid: "user-filter" });
  const filter = h("form", { class: "inline", role: "search" },
    field(caps.usersByPart ? "Find users by part of their name" : caps.usersPaged ? "Find users by display name (exact)" : "Find users by name", search,
      caps.usersByPart ? "Their id or display name, any case." : null),
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
    await act(status, {
      title: "Create a user?",
      body: `A user named “${user}” will be created, with no memories and no keys.`,
      confirmLabel: "Create",
      run: () => post("/v1/users", { user }),
      done: (r) => (r.created ? `User “${r.user}” created.` : `User “${r.user}” already existed.`),
      then: (r) => { location.hash = route("users", r.user); },  // the new user's page, and its address
    });
  });

  const defaultPolicy = policies.default;
  const model = shown.length > 0 && "sessions" in shown[0];
  const rows = shown.map((u) => {
    const own = policies.users[u.user];
    const name = pathless(u.user)
      ? h("th", { scope: "row" }, u.user, h("p", { class: "hint", testid: "pathless" }, pathlessHelp(u.user)))
      : h("th", { scope: "row" }, link(route("users", u.user), u.user));
    return h("tr", { testid: "user-row", "data-user": u.user },
      name,
      model ? h("td", {}, u.display_name || "") : null,
      h("td", { class: "num" }, num(u.blocks)),
      model ? h("td", { class: "num" }, num(u.sessions)) : null,
      model ? h("td", {}, time(u.last_activity) || "never") : null,
      h("td", {}, time(u.created_at)),
      h("td", {}, own ? `own: ${policyText(own)}` : `default: ${policyText(defaultPolicy)}`));
  });
  const heads = model
    ? ["User", "Display name", "Blocks", "Sessions", "Last activity", "Created", "Retention"]
    : ["User", "Blocks", "Created", "Retention"];
  clear(view,
    h("h1", {}, "Users"),
    h("p", { testid: "user-count" }, `${count}; default retention ${policyText(defaultPolicy)}.`),
    h("div", { class: "toolbar" }, filter, create),
    status,
    matching === 0 ? notice("info", q ? "No user matches." : "No users yet: create one above, then give them a key on their page; their agent adds memories with it (POST /v1/memories, or memlane add on the server).", "no-users") : null,
    table(q ? `Users matching “${q}”` : "All users", heads, rows, { testid: "users" }),
    pager(matching, offset, PAGE, (o) => withQuery(route("users"), { q, offset: o })));
}
