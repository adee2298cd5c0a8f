// The console's only way to the server: the /v1 API, with the key of this browser tab.
// The key lives in sessionStorage (this tab only, gone when it closes); no cookie is ever set, so another
// site cannot make this browser send it (no CSRF surface).

const KEY = "memlane.console.key";
const WHO = "memlane.console.who";

// The API's root: the folder above the console's (/ui/ -> /), so a proxy prefix in front still works.
export const API_ROOT = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, code, message, field = null, requestId = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.requestId = requestId;
  }

  // One line a person can act on.
  describe() {
    if (this.status === 0) return this.message;
    const field = this.field ? ` (field: ${this.field})` : "";
    return `${this.message}${field} [HTTP ${this.status} ${this.code}]`;
  }
}

export function key() {
  return sessionStorage.getItem(KEY);
}

export function who() {
  const raw = sessionStorage.getItem(WHO);
  return raw ? JSON.parse(raw) : null;
}

export function signIn(newKey, identity) {
  sessionStorage.setItem(KEY, newKey);
  sessionStorage.setItem(WHO, JSON.stringify(identity));
}

export function signOut() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(WHO);
}

export function url(path, query = {}) {
  const u = new URL(path.replace(/^\//, ""), API_ROOT);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") u.searchParams.set(name, String(value));
  }
  return u;
}

// A request to the API: the decoded JSON answer (null for 204), or an ApiError with the server's own
// code, message and field. `bearer` overrides the tab's key (the sign-in form tries a key before keeping it).
export async function api(method, path, { body, query, bearer, withHeaders } = {}) {
  const headers = { Accept: "application/json" };
  const token = bearer ?? key();
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url(path, query), init);
  } catch (err) {
    throw new ApiError(0, "network", `The server could not be reached (${err.message}).`);
  }
  if (res.status === 204) return withHeaders ? { data: null, headers: res.headers } : null;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(res.status, e.code || `http_${res.status}`, e.message || `HTTP ${res.status}`, e.field, e.request_id);
  }
  return withHeaders ? { data, headers: res.headers } : data;
}

export const get = (path, query) => api("GET", path, { query });
export const post = (path, body) => api("POST", path, { body });
export const put = (path, body) => api("PUT", path, { body });
export const del = (path) => api("DELETE", path);
export const patch = (path, body) => api("PATCH", path, { body });

export const enc = encodeURIComponent;
