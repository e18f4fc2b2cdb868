// HTTP helpers: every route answers JSON, and every error is {error}.

/** ApiError is a refused or failed request, with the server's message. */
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
  }
}

/**
 * api sends one request and returns the decoded JSON answer. A non-2xx
 * answer throws ApiError with the {error} message; a network failure throws
 * ApiError with status 0. A FormData body goes as multipart. The session
 * cookie rides along (same origin).
 */
export async function api(method, path, body, { signal } = {}) {
  const init = { method, signal, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body instanceof FormData) {
    init.body = body; // multipart: the browser sets the boundary
  } else if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, `the daemon did not answer (${err.message})`);
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const msg = (data && typeof data.error === 'string' && data.error) || `${method} ${path}: HTTP ${res.status}`;
    throw new ApiError(res.status, msg, data);
  }
  return data;
}

/** path builds a URL path with an encoded query: path('/a', {q: 'x y'}). */
export function path(base, query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null) q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${base}?${s}` : base;
}

/** sessionPath is /api/sessions/<id><rest>, the ID encoded. */
export function sessionPath(id, rest = '') {
  return `/api/sessions/${encodeURIComponent(id)}${rest}`;
}
