// The portal left alone at scale: a real `tessera serve --demo` on the 512-GPU example cluster with 1,000 extra
// one-GPU jobs (448 run, the rest wait), driven through Debian's chromium by playwright-core. Signed in as admin,
// each page is opened, and once it has rendered its main-thread long tasks (PerformanceObserver 'longtask') are
// recorded while it sits idle for at least two of its poll refreshes: none may take over 100 ms. Run by ctest
// (test portal_browser) or alone:
//   TESSERA_BINARY=build/tessera node --test tests/web/idle.test.mjs
// A failing test keeps its screenshot in $TESSERA_WEB_ARTIFACTS (default build/web-test-results).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiCall, chromiumPath, CHROMIUM_ARGS, freePort, waitFor } from './helpers.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { chromium } = createRequire(path.join(root, 'web/package.json'))('playwright-core');
const binary = path.resolve(process.env.TESSERA_BINARY || path.join(root, 'build/tessera'));
const artifacts = process.env.TESSERA_WEB_ARTIFACTS || path.join(root, 'build/web-test-results');
const CLUSTER = path.join(root, 'examples/clusters/h100-512-8leaf.yaml');
const GPUS = 512;
const JOBS = 1000;
const TEAM_GPUS = 448; // the extra jobs' team: guaranteed and limit, so that 448 run and the rest wait
const LONGEST_MS = 100;
const WINDOWS = 3;  // idle periods tried per page

let server, url, dir, browser, context, adminToken, pendingJob;

const api = (method, p, token, body) => apiCall(url, method, p, token, body);

// Runs in the page before its own code: counts its API requests and how many are still being handled. A request is
// handled once its body has been read, the page's code that reads it has run (Preact renders in a microtask), and a
// frame and a timer have passed (effects such as a chart's redraw).
function instrument() {
  const s = { requests: [], busy: 0 };
  window.__idle = s;
  const settle = () => setTimeout(() => requestAnimationFrame(() => setTimeout(() => { s.busy--; }, 0)), 0);
  const original = window.fetch;
  window.fetch = function (input, init) {
    s.requests.push(String(input instanceof Request ? input.url : input));
    s.busy++;
    return original.call(this, input, init).then(r => {
      const text = r.text;
      r.text = function () { return text.call(this).finally(settle); };
      return r;
    }, e => { settle(); throw e; });
  };
}

before(async () => {
  assert.ok(fs.existsSync(binary), `no tessera binary at ${binary}`);
  assert.ok(chromiumPath, 'no chromium (apt-get install chromium)');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-web-idle-'));
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const db = path.join(dir, 'tessera.db');
  const log = path.join(dir, 'serve.log');
  server = spawn(binary, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`, '--cluster', CLUSTER, '--demo', '--speed', '60',
    '--max-connections-per-address', '4096'], { cwd: dir, stdio: ['ignore', fs.openSync(log, 'a'), fs.openSync(log, 'a')] });
  let exited = null;
  server.on('exit', code => { exited = code; });
  server.on('error', e => { exited = e.message; });
  await waitFor(async () => {
    if (exited !== null) {
      throw Object.assign(new Error(`tessera serve exited (${exited}): ${fs.readFileSync(log, 'utf8').slice(-400)}`), { fatal: true });
    }
    return (await fetch(url + '/readyz')).status === 200;
  }, 'tessera serve to be ready', 60000);
  adminToken = fs.readFileSync(`${db}.admin-token`, 'utf8').trim();
  const team = await api('POST', '/api/v1/teams', adminToken, { name: 'web-idle', guaranteed_gpus: TEAM_GPUS, limit_gpus: TEAM_GPUS });
  assert.equal(team.status, 201, `create team web-idle: ${team.text}`);
  const made = [];
  for (let i = 0; i < JOBS; i += 50) {
    made.push(...await Promise.all(Array.from({ length: 50 }, (_, k) => api('POST', '/api/v1/jobs', adminToken, {
      name: `idle-${i + k}`, team: 'web-idle', class: 'training', workers: 1, gpus_per_worker: 1, memory_gib: 10,
      project: 'idle', duration_s: 86400 }))));
  }
  const refused = made.filter(r => r.status !== 201);
  assert.equal(refused.length, 0, `jobs refused: ${refused.slice(0, 3).map(r => r.text).join('; ')}`);
  // Wait for the cycles to place what fits: the team's guarantee taken, the last job waiting.
  await waitFor(async () => {
    const t = (await api('GET', '/api/v1/teams', adminToken)).json.teams.find(x => x.name === 'web-idle');
    return t.allocated_gpus >= TEAM_GPUS;
  }, `team web-idle to hold ${TEAM_GPUS} GPUs`, 60000, 500);
  pendingJob = made[made.length - 1].json;
  assert.equal((await api('GET', `/api/v1/jobs/${pendingJob.id}`, adminToken)).json.state, 'Pending');
  browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  await context.addInitScript(instrument);
});

after(async () => {
  if (browser) await browser.close();
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise(r => { server.once('exit', r); setTimeout(r, 10000); });
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// Each page: its route; what shows that it has rendered; the polls its idle window spans (request path: how many
// refreshes); and the shortest window. The Admin page does not poll: it is watched for as long as two polls of the
// jobs page (4 s).
function pages() {
  const job = pendingJob.id;
  return [
    { name: 'jobs', route: 'jobs', polls: { '^/api/v1/jobs$': 2 }, ready: async page => {
      await page.getByTestId('jobs').locator('[data-job-id]').first().waitFor({ timeout: 20000 });
      await waitFor(async () => Number((/(\d+) jobs/.exec(await page.locator('.toolbar').innerText()) || [])[1]) >= JOBS,
        `the jobs page to count at least ${JOBS} jobs`);
    } },
    { name: `job ${job}`, route: `jobs/${job}`, polls: { [`^/api/v1/jobs/${job}$`]: 2 }, ready: async page => {
      await page.locator(`section[data-job="${job}"] .timeline li`).first().waitFor({ timeout: 20000 });
      await page.getByText('as asked', { exact: true }).waitFor({ timeout: 20000 }); // the what-if
    } },
    { name: 'team', route: 'team', polls: { '^/api/v1/teams$': 2 }, ready: async page => {
      await page.locator('.team-card', { hasText: 'web-idle' }).waitFor({ timeout: 20000 });
    } },
    { name: 'cluster', route: 'cluster', polls: { '^/api/v1/cluster$': 2, '^/api/v1/cluster/history$': 1 }, ready: async page => {
      await page.waitForFunction(n => document.querySelectorAll('[data-testid="gpu"]').length === n, GPUS, { timeout: 20000 });
      await page.getByTestId('utilisation-chart').locator('canvas').waitFor({ timeout: 20000 });
    } },
    { name: 'chargeback', route: 'chargeback', polls: { '^/api/v1/usage$': 2 }, ready: async page => {
      await page.getByTestId('chargeback').locator('tbody tr').first().waitFor({ timeout: 20000 });
    } },
    { name: 'admin', route: 'admin', polls: {}, minMs: 4000, ready: async page => {
      await page.getByRole('heading', { name: 'Users and tokens' }).waitFor({ timeout: 20000 });
      await page.locator('section[aria-labelledby="audit-title"] tbody tr').first().waitFor({ timeout: 20000 });
    } },
  ];
}

// The page has no API request being handled (see instrument).
async function settled(page) {
  await page.waitForFunction(() => window.__idle.busy === 0, null, { timeout: 20000, polling: 100 });
}

// Long tasks (ms) of the page from now until it has handled `polls` refreshes and `minMs` have passed.
async function idleLongTasks(page, { polls, minMs = 0 }) {
  await page.evaluate(() => {
    const s = window.__idle;
    s.long = [];
    s.from = s.requests.length;
    s.start = performance.now();
    s.observer = new PerformanceObserver(list => { for (const e of list.getEntries()) s.long.push(e.duration); });
    s.observer.observe({ type: 'longtask', buffered: false });
  });
  await page.waitForFunction(([want, ms]) => {
    const s = window.__idle;
    const seen = s.requests.slice(s.from).map(u => new URL(u, location.href).pathname);
    return s.busy === 0 && performance.now() - s.start >= ms
      && Object.entries(want).every(([re, n]) => seen.filter(p => new RegExp(re).test(p)).length >= n);
  }, [polls, minMs], { timeout: 60000, polling: 250 });
  return page.evaluate(() => {
    const s = window.__idle;
    for (const e of s.observer.takeRecords()) s.long.push(e.duration);
    s.observer.disconnect();
    return { long: s.long.map(d => Math.round(d)), seconds: Math.round((performance.now() - s.start) / 100) / 10 };
  });
}

test(`no page has a main-thread task over ${LONGEST_MS} ms while idle (${JOBS} extra jobs, ${GPUS} GPUs)`, async t => {
  const page = await context.newPage();
  let current = 'sign-in';
  try {
    await page.goto(url + '/');
    await page.getByLabel('Token', { exact: true }).fill(adminToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('jobs').waitFor({ state: 'attached', timeout: 10000 });
    const over = [];
    for (const p of pages()) {
      current = p.name;
      await page.goto(`${url}/#/${p.route}`);
      await p.ready(page);
      await settled(page);
      // A stall the page causes shows in every idle period; one a busy shared machine causes now and then does
      // not: a page passes when one of up to three idle periods has no task over the limit.
      const windows = [];
      for (let w = 0; w < WINDOWS; w++) {
        const { long, seconds } = await idleLongTasks(page, p);
        t.diagnostic(`${p.name}: ${seconds} s idle, ${long.length ? `tasks over 50 ms: ${long.join(', ')} ms` : 'no task over 50 ms'}`);
        windows.push(long.filter(d => d > LONGEST_MS));
        if (!windows.at(-1).length) break;
      }
      if (windows.every(w => w.length)) over.push(`${p.name}: ${windows.map(w => w.join(', ') + ' ms').join(' / ')}`);
    }
    assert.ok(!over.length, `main-thread tasks over ${LONGEST_MS} ms while idle: ${over.join('; ')}`);
  } catch (e) {
    fs.mkdirSync(artifacts, { recursive: true });
    const file = path.join(artifacts, `idle-${current.replace(/\W+/g, '-')}.png`);
    await page.screenshot({ path: file, fullPage: true }).catch(() => {});
    e.message += ` (last page: ${current}; screenshot: ${file})`;
    throw e;
  } finally {
    await page.close();
  }
});
