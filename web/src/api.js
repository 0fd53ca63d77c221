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

// A replica that does not lead answers a write 503. With `Tessera-Leader: URL` the portal cannot send the
// write there itself (the session lives on this replica, and another origin's API is closed to this page):
// the follower handler is told the leader's URL and the error says where to go. Without one (a takeover in
// progress) the write is sent again after Retry-After, up to three times.
let onFollower = () => {};
export function setFollowerHandler(fn) { onFollower = fn; }

// The leader's URL when it is an http(s) URL (it becomes a link), else ''.
export function leaderLink(url) {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin : '';
  } catch (e) { return ''; }
}

const sleep = ms => new Promise(r => setTimeout(r, ms));

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  for (let attempt = 0; ; attempt++) {
    const r = await fetch(path, {
      method, headers, credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
    if (r.status === 401 && !path.startsWith('/api/v1/session')) onSignedOut();
    if (r.status === 304) return NOT_MODIFIED;
    if (r.status === 503 && method !== 'GET' && method !== 'HEAD') {
      const leader = leaderLink(r.headers.get('Tessera-Leader') || '');
      if (leader) {
        onFollower(leader);
        const e = new ApiError(r.status, null,
          `this replica only reads (it follows the leader); make changes in the portal at ${leader}`);
        e.leader = leader;
        throw e;
      }
      const wait = Number(r.headers.get('Retry-After'));
      if (attempt < 3 && wait > 0) { await sleep(Math.min(wait, 5) * 1000); continue; }
    }
    if (!r.ok) throw new ApiError(r.status, json, text);
    noteServiceTime(json);
    return json;
  }
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
