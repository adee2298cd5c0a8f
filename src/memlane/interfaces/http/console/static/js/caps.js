// What the server offers, read once per page load from its OpenAPI description: pages of the console that
// need a route (sessions, edits, prompts, search filters) appear only on a server that has it.

import { url } from "./api.js";

let pending = null;

function read(spec) {
  const ops = new Set();
  for (const [path, methods] of Object.entries(spec.paths || {})) {
    for (const method of Object.keys(methods)) ops.add(`${method.toUpperCase()} ${path}`);
  }
  const schemas = (spec.components && spec.components.schemas) || {};
  const fields = (name) => new Set(Object.keys((schemas[name] && schemas[name].properties) || {}));
  const params = (method, path) => new Set(((spec.paths[path] || {})[method] || {}).parameters?.map((p) => p.name) || []);
  return {
    has: (op) => ops.has(op),
    searchFields: fields("SearchIn"),
    usersPaged: params("get", "/v1/users").has("limit"),
    usersByPart: params("get", "/v1/users").has("q"),
  };
}

export function capabilities() {
  if (!pending) {
    pending = fetch(url("/openapi.json"), { cache: "no-store", credentials: "omit" })
      .then((res) => (res.ok ? res.json() : { paths: {} }))
      .then(read, () => read({ paths: {} }));
  }
  return pending;
}
