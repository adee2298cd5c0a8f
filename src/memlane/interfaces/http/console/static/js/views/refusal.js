// Shown when the server refuses this key a page (403): a user key reaches only its own user.

import { clear, h, link, route } from "../dom.js";

export async function refusalPage(view, { me, reason, user }) {
  const whose = user ? `the memory of user “${user}”` : "this page";
  clear(view,
    h("section", { testid: "refusal", class: "refusal" },
      h("h1", {}, "Access refused"),
      h("p", {}, `The key you signed in with may not open ${whose}. A user's key reaches only that user's own memory; the admin key reaches every user.`),
      h("p", { class: "muted" }, `The server said: ${reason}`),
      h("p", {}, me.admin ? link(route("users"), "Back to the users") : link(route("users", me.user), "Back to your memory"))));
}
