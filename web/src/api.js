// The portal's only way to the server: the same /api/v1 endpoints the CLI uses. The session cookie
// (HttpOnly, set by POST /api/v1/session) authenticates; a state-changing request also carries the
// session's CSRF token in the X-CSRF-Token header. No token is ever stored in the browser.

let csrfToken = null;
let onSignedOut = () => {};

export function setCsrfToken(t) { csrfToken = t; }
export function setSignedOutHandler(fn) { onSignedOut = fn; }

export class ApiError extends Error {
  constructor(status, body, text) {
    const e = (body && body.error) || {};
    super(e.message || (text && text.slice(0, 200)) || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || '';
    this.field = e.field || '';
  }
}

// Service clock: the service may run faster than the wall (`--speed`); responses that carry `now`
// (service seconds) keep this estimate current.
const clock = { now: null, wall: 0, speed: 1, knownSpeed: false };
export function noteServiceTime(json) {
  if (!json || typeof json !== 'object' || typeof json.now !== 'number') return;
  const wall = Date.now();
  if (typeof json.speed === 'number' && json.speed > 0) {
    clock.speed = json.speed;
    clock.knownSpeed = true;
  } else if (!clock.knownSpeed && clock.now !== null && wall - clock.wall > 3000) {
    clock.speed = Math.max(0.001, (json.now - clock.now) / ((wall - clock.wall) / 1000));
  }
  clock.now = json.now;
  clock.wall = wall;
}
export function serviceNow() {
  if (clock.now === null) return Date.now() / 1000;
  return clock.now + ((Date.now() - clock.wall) / 1000) * clock.speed;
}

// What api() returns for 304 Not Modified (a poll with `since` whose answer did not change).
export const NOT_MODIFIED = Object.freeze({ notModified: true });

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  const r = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (r.status === 401 && !path.startsWith('/api/v1/session')) onSignedOut();
  if (r.status === 304) return NOT_MODIFIED;
  if (!r.ok) throw new ApiError(r.status, json, text);
  noteServiceTime(json);
  return json;
}

// Lists come either as a bare array or wrapped ({"jobs": [...]}, {"teams": [...]}).
export function listOf(json, key) {
  if (Array.isArray(json)) return json;
  if (json && Array.isArray(json[key])) return json[key];
  return [];
}

// All pages of a paged list endpoint (bounded).
export async function allPages(path, key, maxPages = 20) {
  const out = [];
  let token = '';
  for (let i = 0; i < maxPages; i++) {
    const sep = path.includes('?') ? '&' : '?';
    const j = await api('GET', path + (token ? `${sep}page_token=${encodeURIComponent(token)}` : ''));
    out.push(...listOf(j, key));
    token = j && j.next_page_token;
    if (!token) break;
  }
  return out;
}
