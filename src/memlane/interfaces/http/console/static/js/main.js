// The console's router: the address after "#" names the page, so every page can be bookmarked, reloaded and
// opened in a new tab of the same window (the key is the tab's; another tab signs in again).

import { ApiError, signOut, who } from "./api.js";
import { clear, dropFlash, h, link, notice, route } from "./dom.js";
import { blockPage } from "./views/block.js";
import { opsPage } from "./views/ops.js";
import { refusalPage } from "./views/refusal.js";
import { searchPage } from "./views/search.js";
import { sessionPage } from "./views/sessions.js";
import { signInPage } from "./views/signin.js";
import { userPage } from "./views/user.js";
import { usersPage } from "./views/users.js";

const view = document.getElementById("view");

function parse() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs] = raw.split("?", 2);
  const parts = path ? path.split("/").map((p) => decodeURIComponent(p)) : [];
  return { parts, query: new URLSearchParams(qs || "") };
}

function home(me) {
  return me.admin ? route("users") : route("users", me.user);
}

function resolve(parts, me) {
  const [first, user, section, id] = parts;
  if (first === "users" && user === undefined) return me.admin ? usersPage : null;
  if (first === "users" && section === undefined) return userPage;
  if (first === "users" && section === "search") return searchPage;
  if (first === "users" && section === "blocks" && id !== undefined) return blockPage;
  if (first === "users" && section === "sessions" && id !== undefined) return sessionPage;
  if (first === "ops") return opsPage;
  return undefined;
}

function renderChrome(me) {
  const nav = document.getElementById("nav");
  const whoEl = document.getElementById("who");
  if (!me) {
    clear(nav);
    clear(whoEl);
    return;
  }
  const items = me.admin
    ? [link(route("users"), "Users"), link(route("ops"), "Operations")]
    : [link(route("users", me.user), "My memory"), link(route("users", me.user, "search"), "Search"),
       link(route("ops"), "Queue")];
  clear(nav, h("ul", {}, items.map((a) => h("li", {}, a))));
  const current = location.hash.split("?")[0];
  for (const a of nav.querySelectorAll("a")) if (a.getAttribute("href") === current) a.setAttribute("aria-current", "page");
  clear(whoEl,
    h("span", { testid: "signed-in-as" }, me.admin ? "admin" : me.user),
    h("button", { type: "button", class: "link", onclick: () => { signOut(); location.hash = "#/signin"; } }, "Sign out"));
}

async function render() {
  const { parts, query } = parse();
  const me = who();
  renderChrome(me);
  document.body.dataset.ready = "false";
  if (!me && parts[0] !== "signin") {
    // The address says where the tab is: the sign-in page, and where to go after it.
    location.replace(location.hash && location.hash !== "#/" ? `#/signin?next=${encodeURIComponent(location.hash)}` : "#/signin");
    return;
  }
  if (parts[0] === "signin") {
    if (me) signOut();
    renderChrome(null);
    await signInPage(view, { query });
  } else if (parts.length === 0) {
    location.replace(home(me));
    return;
  } else {
    const page = resolve(parts, me);
    try {
      if (page === null) await refusalPage(view, { me, reason: "Only the admin key lists users." });
      else if (page === undefined) notFound(me);
      else await page(view, { parts, query, me });
    } catch (err) {
      failed(err, parts, me);
    }
  }
  dropFlash();
  document.title = `${view.querySelector("h1")?.textContent || "memlane"} · memlane console`;
  const heading = view.querySelector("h1");
  if (heading) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
  }
  document.body.dataset.ready = "true";
}

function notFound(me) {
  clear(view, h("h1", {}, "No such page"), h("p", {}, link(home(me), "Back to the start")));
}

// A page whose reads failed: a refused key goes back to sign-in, a refusal gets its own page, anything
// else is said as the server said it.
function failed(err, parts, me) {
  if (err instanceof ApiError && err.status === 401) {
    signOut();
    renderChrome(null);
    location.replace(`#/signin?expired=1&next=${encodeURIComponent(location.hash)}`);
    return;
  }
  if (err instanceof ApiError && err.status === 403) {
    refusalPage(view, { me, reason: err.message, user: parts[1] });
    return;
  }
  const message = err instanceof ApiError ? err.describe() : `${err.name}: ${err.message}`;
  clear(view, h("h1", {}, "This page could not be loaded"), notice("error", message, "load-error"),
    h("p", {}, link(home(me), "Back to the start")));
}

window.addEventListener("hashchange", render);
document.querySelector("[data-skip]").addEventListener("click", (e) => {
  e.preventDefault();
  view.focus();
});
render();
