// Helpers the portal's browser tests share: Debian's chromium, a free loopback port, polling, and API calls.
import fs from 'node:fs';
import net from 'node:net';

export const chromiumPath = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(p => fs.existsSync(p));
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

// Polls `fn` until it returns something truthy (an error with `fatal` set ends the wait at once).
export async function waitFor(fn, what, ms = 20000, every = 200) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { if (e.fatal) throw e; last = e; }
    await new Promise(r => setTimeout(r, every));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

// One API call to the server at `base`: its status, JSON body (null when not JSON, e.g. CSV) and text.
export async function apiCall(base, method, p, token, body) {
  const r = await fetch(base + p, {
    method, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch (e) { /* CSV or empty */ }
  return { status: r.status, json, text };
}
