// Browser tests of the web portal: a real `tessera serve --demo` (fresh database, loopback port) driven
// through Debian's chromium by playwright-core. Run by ctest (test portal_browser) or directly:
//   TESSERA_BINARY=build/tessera node --test tests/web/
// (TESSERA_SERVE_ARGS replaces the default `--demo --speed 60`.)
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
let server, url, dir, browser, context, adminToken;
const users = {};

const api = (method, p, token, body) => apiCall(url, method, p, token, body);

// Runs a browser step; on failure keeps a full-page screenshot named after the test.
async function withPage(t, fn) {
  const page = await context.newPage();
  try {
    await fn(page);
  } catch (e) {
    fs.mkdirSync(artifacts, { recursive: true });
    const file = path.join(artifacts, `${t.name.replace(/\W+/g, '-')}.png`);
    await page.screenshot({ path: file, fullPage: true }).catch(() => {});
    e.message += ` (screenshot: ${file})`;
    throw e;
  } finally {
    await page.close();
  }
}

async function signIn(page, token) {
  await context.clearCookies();
  await page.goto(url + '/');
  await page.getByLabel('Token', { exact: true }).fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('jobs').waitFor({ state: 'attached', timeout: 10000 });
}

// The title follows the route once the page has rendered: wait for it rather than read it at once.
async function titleStarts(page, prefix) {
  await page.waitForFunction(p => document.title.startsWith(p), prefix, { timeout: 10000 })
    .catch(async () => assert.fail(`title "${await page.title()}" does not start with ${prefix}`));
}

async function signOut(page) {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Token', { exact: true }).waitFor({ timeout: 10000 });
}

before(async () => {
  assert.ok(fs.existsSync(binary), `no tessera binary at ${binary}`);
  assert.ok(chromiumPath, 'no chromium (apt-get install chromium)');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-web-test-'));
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const db = path.join(dir, 'tessera.db');
  // Every browser context and this test's own client share 127.0.0.1, so the per-address connection cap
  // (a defence against one client holding every connection) is raised for this run.
  const extra = (process.env.TESSERA_SERVE_ARGS || '--demo --speed 60 --max-connections-per-address 4096')
    .split(' ').filter(Boolean);
  server = spawn(binary, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`, ...extra],
    { cwd: dir, stdio: ['ignore', fs.openSync(path.join(dir, 'serve.log'), 'a'), fs.openSync(path.join(dir, 'serve.log'), 'a')] });
  let exited = null;
  server.on('exit', code => { exited = code; });
  server.on('error', e => { exited = e.message; });
  await waitFor(async () => {
    if (exited !== null) {
      throw Object.assign(new Error(`tessera serve exited (${exited}): ${fs.readFileSync(path.join(dir, 'serve.log'), 'utf8').slice(-400)}`), { fatal: true });
    }
    return (await fetch(url + '/readyz')).status === 200;
  }, 'tessera serve to be ready', 60000);
  adminToken = fs.readFileSync(`${db}.admin-token`, 'utf8').trim();
  for (const [team, guaranteed] of [['web-a', 16], ['web-b', 8]]) {
    const r = await api('POST', '/api/v1/teams', adminToken, { name: team, guaranteed_gpus: guaranteed, limit_gpus: 64 });
    assert.equal(r.status, 201, `create team ${team}: ${r.text}`);
  }
  for (const [name, team, role] of [['web-lead', 'web-a', 'team-lead'], ['web-other', 'web-b', 'member'],
    ['web-rotator', 'web-a', 'team-lead'], ['web-member', 'web-a', 'member']]) {
    const r = await api('POST', '/api/v1/users', adminToken, { name, team, role });
    assert.equal(r.status, 201, `create user ${name}: ${r.text}`);
    users[name] = r.json.token;
  }
  // A short job of team web-a, so that its usage reaches the ledger while the tests run.
  const small = await api('POST', '/api/v1/jobs', users['web-lead'], { name: 'web-small', class: 'training', workers: 1,
    gpus_per_worker: 1, memory_gib: 10, project: 'web', duration_s: 300, priority_class: 'training-high' });
  assert.equal(small.status, 201, `submit web-small: ${small.text}`);
  browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
  context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
});

after(async () => {
  if (browser) await browser.close();
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise(r => { server.once('exit', r); setTimeout(r, 10000); });
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

let formJob = null; // {id, name} of the job submitted through the form

test('sign in with a token sets an HttpOnly session cookie and keeps no token in the page', async t => {
  await withPage(t, async page => {
    await page.goto(url + '/');
    await page.getByLabel('Token', { exact: true }).fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'not valid' }).waitFor({ timeout: 5000 });
    await signIn(page, users['web-lead']);
    const cookies = await context.cookies(url);
    const session = cookies.find(c => c.name === 'tessera_session');
    assert.ok(session, 'no session cookie');
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Strict');
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
    assert.ok(!stored.includes(users['web-lead']), 'the token is kept in the page');
    // A state-changing request from the page without the CSRF header is refused.
    const status = await page.evaluate(async () => (await fetch('/api/v1/jobs', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'csrf', workers: 1, gpus_per_worker: 1 }) })).status);
    assert.equal(status, 403);
  });
});

test('submit through the form: field errors, then a pending job with position and reason', async t => {
  // Fill the cluster with the team's big gangs so that the form's job waits.
  await waitFor(async () => {
    await api('POST', '/api/v1/jobs', users['web-lead'], { name: 'web-filler', class: 'training', workers: 8,
      gpus_per_worker: 8, memory_gib: 70, project: 'web', duration_s: 360000 });
    const q = await api('GET', '/api/v1/queue', users['web-lead']);
    return (q.json?.jobs || []).some(j => j.team === 'web-a');
  }, 'a pending job of team web-a', 30000, 1000);
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    await page.getByRole('button', { name: 'New job' }).click();
    const form = page.getByTestId('submit-job');
    await form.getByLabel('Name', { exact: true }).fill('web-form-job');
    await form.getByLabel('Workers', { exact: true }).fill('4');
    await form.getByLabel('GPUs per worker', { exact: true }).fill('9');
    await form.getByRole('button', { name: 'Submit', exact: true }).click();
    const err = page.getByTestId('error-gpus_per_worker');
    await err.waitFor({ timeout: 5000 });
    assert.match(await err.innerText(), /\S{3,}/);
    assert.equal(await form.getByLabel('GPUs per worker', { exact: true }).getAttribute('aria-invalid'), 'true');
    await form.getByLabel('GPUs per worker', { exact: true }).fill('8');
    await form.getByLabel('Project', { exact: true }).fill('web');
    await form.getByLabel('Duration (s)', { exact: true }).fill('36000');
    await form.getByLabel('Container image', { exact: true }).fill('registry.example/trainer:1');
    await form.getByLabel('Command', { exact: true }).fill('python  train.py --epochs=3');
    await form.getByRole('button', { name: 'Submit', exact: true }).click();
    const row = page.getByTestId('jobs').locator('[data-job-id]', { hasText: 'web-form-job' });
    await row.first().waitFor({ timeout: 10000 });
    formJob = { id: await row.first().getAttribute('data-job-id'), name: 'web-form-job' };
    const pos = row.getByTestId('queue-position');
    await waitFor(async () => /\d/.test(await pos.innerText()), 'a queue position with a number', 15000);
    const reason = (await row.getByTestId('reason').innerText()).trim();
    assert.ok(reason.length >= 10, `reason too short: '${reason}'`);
    const j = await api('GET', `/api/v1/jobs/${formJob.id}`, users['web-lead']);
    assert.equal(j.status, 200);
    assert.equal(j.json.state, 'Pending');
    assert.equal(j.json.project, 'web');
    assert.deepEqual(j.json.spec.container, { image: 'registry.example/trainer:1', command: ['python', 'train.py', '--epochs=3'] });
  });
});

test('change the priority class of the job from the jobs page', async t => {
  assert.ok(formJob, 'no job from the form test');
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    const row = page.locator(`[data-job-id="${formJob.id}"]`);
    await row.getByLabel(`Priority for ${formJob.name}`).selectOption('training-high');
    await waitFor(async () => (await api('GET', `/api/v1/jobs/${formJob.id}`, users['web-lead'])).json.priority_class === 'training-high',
      'the priority change', 10000);
    // The result is announced, naming the job, and stays until dismissed.
    const status = page.getByTestId('announce');
    await waitFor(async () => (await status.innerText()).includes(`Priority of ${formJob.name}`), 'the announcement', 5000);
    assert.equal(await status.getAttribute('role'), 'status');
    await status.getByRole('button', { name: 'Dismiss message' }).click();
    assert.equal((await status.innerText()).trim(), '');
  });
});

test('the job page shows timeline, placement and what-if', async t => {
  assert.ok(formJob, 'no job from the form test');
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    await page.getByRole('link', { name: formJob.name }).click();
    await page.getByRole('heading', { name: /web-form-job/ }).waitFor({ timeout: 10000 });
    await page.getByRole('heading', { name: 'Timeline' }).waitFor();
    assert.match(await page.locator('.timeline').innerText(), /submitted/);
    assert.match(await page.getByText('Submit to eligible').locator('xpath=following-sibling::dd[1]').innerText(), /\d|—/);
  });
});

test('a member of another team can neither see nor touch the job', async t => {
  assert.ok(formJob, 'no job from the form test');
  const other = users['web-other'];
  assert.equal((await api('GET', `/api/v1/jobs/${formJob.id}`, other)).status, 404);
  assert.equal((await api('POST', `/api/v1/jobs/${formJob.id}:cancel`, other)).status, 404);
  assert.equal((await api('PATCH', `/api/v1/jobs/${formJob.id}`, other, { priority_class: 'best-effort' })).status, 404);
  await withPage(t, async page => {
    await signIn(page, other);
    await page.waitForTimeout(2500); // one poll later
    assert.equal(await page.locator(`[data-job-id="${formJob.id}"]`).count(), 0);
    await page.goto(`${url}/#/jobs/${formJob.id}`);
    await page.getByRole('alert').filter({ hasText: 'No such job' }).waitFor({ timeout: 10000 });
    // The page's own session cannot cancel it either.
    const status = await page.evaluate(async id => {
      const s = await (await fetch('/api/v1/session')).json();
      return (await fetch(`/api/v1/jobs/${id}:cancel`, { method: 'POST', headers: { 'X-CSRF-Token': s.csrf_token } })).status;
    }, formJob.id);
    assert.equal(status, 404);
    await signOut(page);
  });
  const after = (await api('GET', `/api/v1/jobs/${formJob.id}`, users['web-lead'])).json;
  assert.notEqual(after.state, 'Cancelled');
  assert.equal(after.priority_class, 'training-high');
});

test('cancel the job from the jobs page', async t => {
  assert.ok(formJob, 'no job from the form test');
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    const row = page.locator(`[data-job-id="${formJob.id}"]`);
    await row.getByRole('button', { name: `Cancel ${formJob.name}` }).click();
    // "Keep" takes the confirmation back; then cancel for real.
    await row.getByRole('button', { name: `Keep ${formJob.name}` }).click();
    assert.equal(await row.getByRole('button', { name: `Confirm cancel of ${formJob.name}` }).count(), 0);
    await row.getByRole('button', { name: `Cancel ${formJob.name}` }).click();
    await row.getByRole('button', { name: `Confirm cancel of ${formJob.name}` }).click();
    await page.getByTestId('announce').filter({ hasText: `Cancelled ${formJob.name}` }).waitFor({ timeout: 5000 });
    await waitFor(async () => (await api('GET', `/api/v1/jobs/${formJob.id}`, users['web-lead'])).json.state === 'Cancelled',
      'the job to be cancelled', 10000);
    await row.waitFor({ state: 'detached', timeout: 10000 });
  });
});

test('the team\'s usage appears in chargeback, with a CSV download', async t => {
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    await page.getByRole('link', { name: 'Chargeback', exact: true }).click();
    const table = page.getByTestId('chargeback');
    await waitFor(async () => {
      await page.getByLabel('Period').selectOption({ label: 'Since the ledger began' });
      const text = await table.innerText();
      return /web-a\s+\S+\s+\S+\s+[1-9]|web-a[^\n]*\t[0-9.]*[1-9]/.test(text) ? text : null;
    }, 'usage of team web-a in the chargeback table', 90000, 1000);
    const href = await page.getByRole('link', { name: 'CSV' }).getAttribute('href');
    const r = await page.request.get(new URL(href, page.url()).toString());
    assert.equal(r.status(), 200);
    const csv = await r.text();
    assert.ok(csv.split('\n')[0].includes(','), `not CSV: ${csv.slice(0, 80)}`);
    assert.ok(csv.includes('web-a'));
  });
});

test('keyboard only: sign in, open the form, submit; every control has a name', async t => {
  await withPage(t, async page => {
    await context.clearCookies();
    await page.goto(url + '/');
    await page.getByLabel('Token', { exact: true }).waitFor();
    await page.keyboard.type(users['web-lead']); // the token field has focus
    await page.keyboard.press('Enter');
    await page.getByTestId('jobs').waitFor({ state: 'attached', timeout: 10000 });
    let onNewJob = false;
    for (let i = 0; i < 20 && !onNewJob; i++) {
      await page.keyboard.press('Tab');
      onNewJob = await page.evaluate(() => document.activeElement && document.activeElement.textContent === 'New job');
    }
    assert.ok(onNewJob, 'Tab never reaches the New job button');
    await page.keyboard.press('Enter');
    // The form renders, then moves focus to Name: wait for it (fails after 5 s if focus never arrives).
    await page.waitForFunction(() => document.activeElement && document.activeElement.id === 'f-name', null,
                               { timeout: 5000 });
    await page.keyboard.type('web-keyboard-job');
    await page.keyboard.press('Tab'); // Class
    await page.keyboard.press('Tab'); // Workers
    await page.keyboard.type('1');
    await page.keyboard.press('Tab'); // GPUs per worker
    await page.keyboard.type('1');
    await page.keyboard.press('Enter');
    await page.getByTestId('jobs').locator('[data-job-id]', { hasText: 'web-keyboard-job' }).first().waitFor({ timeout: 10000 });
    // Every input, select, textarea, button and link on the jobs page has an accessible name.
    await page.getByRole('button', { name: 'New job' }).click();
    const unnamed = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea, button, a[href]')]
      .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
      .map(e => e.outerHTML.slice(0, 80)));
    assert.deepEqual(unnamed, []);
  });
});

test('the cluster page marks cordoned and drained nodes', async t => {
  const list = await api('GET', '/api/v1/nodes', adminToken);
  assert.equal(list.status, 200, list.text);
  const [cordoned, drained] = list.json.nodes.slice(-2).map(n => n.name);
  assert.equal((await api('POST', `/api/v1/nodes/${cordoned}:cordon`, adminToken, {})).status, 200);
  const d = await api('POST', `/api/v1/nodes/${drained}:drain`, adminToken, {});
  assert.equal(d.status, 200, d.text);
  try {
    await withPage(t, async page => {
      await signIn(page, users['web-lead']);
      await page.getByRole('link', { name: 'Cluster', exact: true }).click();
      const state = name => page.locator(`[data-testid="node"][aria-label^="Node ${name},"] [data-testid="node-state"]`);
      await waitFor(async () => (await state(cordoned).innerText()) === 'cordoned', `${cordoned} marked cordoned`);
      await waitFor(async () => /^drain(ing|ed)$/.test(await state(drained).innerText()), `${drained} marked draining or drained`);
      assert.equal(await page.locator(`[data-testid="node"][aria-label^="Node ${list.json.nodes[0].name},"]`).getAttribute('data-state'), 'ready');
    });
  } finally {
    for (const n of [cordoned, drained]) await api('POST', `/api/v1/nodes/${n}:uncordon`, adminToken, {});
  }
});

test('history: the state filter lists a cancelled job, which can be resubmitted', async t => {
  const made = await api('POST', '/api/v1/jobs', users['web-lead'], { name: 'web-history', class: 'training', workers: 1,
    gpus_per_worker: 1, project: 'web', duration_s: 600 });
  assert.equal(made.status, 201, made.text);
  assert.equal((await api('POST', `/api/v1/jobs/${made.json.id}:cancel`, users['web-lead'])).status, 200);
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    const row = page.locator(`[data-testid="jobs"] [data-job-id="${made.json.id}"]`);
    await page.waitForTimeout(500);
    assert.equal(await row.count(), 0, 'a cancelled job is listed under Active');
    await page.getByLabel('State', { exact: true }).selectOption({ label: 'Cancelled' });
    await page.getByLabel('Search', { exact: true }).fill('web-history');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await row.waitFor({ timeout: 10000 });
    assert.match(await row.innerText(), /Cancelled/);
    await row.getByRole('button', { name: 'Resubmit web-history', exact: true }).click();
    const said = page.getByTestId('announce').filter({ hasText: /Resubmitted web-history as job \d+/ });
    await said.waitFor({ timeout: 5000 });
    const id = (await said.innerText()).match(/as job (\d+)/)[1];
    const again = await api('GET', `/api/v1/jobs/${id}`, users['web-lead']);
    assert.equal(again.json.name, 'web-history');
    assert.notEqual(again.json.state, 'Cancelled');
  });
});

test('a start estimate held by the team limit shows a <time> that stays put across polls', async t => {
  const team = await api('POST', '/api/v1/teams', adminToken, { name: 'web-one', guaranteed_gpus: 1, limit_gpus: 1 });
  assert.equal(team.status, 201, team.text);
  const hold = await api('POST', '/api/v1/jobs', adminToken, { name: 'web-hold', team: 'web-one', class: 'training', workers: 1,
    gpus_per_worker: 1, duration_s: 86400, priority_class: 'training-high' });
  await waitFor(async () => (await api('GET', `/api/v1/jobs/${hold.json.id}`, adminToken)).json.state === 'Running', 'the holder to run', 60000, 500);
  const behind = await api('POST', '/api/v1/jobs', adminToken, { name: 'web-behind', team: 'web-one', class: 'training', workers: 1,
    gpus_per_worker: 1, duration_s: 600 });
  await withPage(t, async page => {
    await signIn(page, adminToken);
    await page.getByLabel('Search', { exact: true }).fill('web-behind');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const cell = page.locator(`[data-job-id="${behind.json.id}"] [data-testid="estimated-start"] time`);
    await cell.waitFor({ timeout: 15000 });
    const seen = new Set();
    for (let i = 0; i < 4; i++) { seen.add(await cell.getAttribute('datetime')); await page.waitForTimeout(2200); }
    assert.equal(seen.size, 1, `the estimate moved: ${[...seen].join(', ')}`);
    const h = (await api('GET', `/api/v1/jobs/${hold.json.id}`, adminToken)).json;
    // Its team's limit is taken by the holder: it cannot start before the holder's declared end.
    assert.ok(Date.parse([...seen][0]) >= Date.parse(h.started_at) + 86400 * 1000, `estimate ${[...seen][0]} before the holder ends`);
  });
});

test('a member sees no Admin link; a lead rotating their own token sees it until dismissed', async t => {
  await withPage(t, async page => {
    await signIn(page, users['web-member']);
    assert.equal(await page.getByRole('link', { name: 'Admin', exact: true }).count(), 0);
    await titleStarts(page, 'Jobs');
    await signOut(page);
    await signIn(page, users['web-rotator']);
    await page.getByRole('link', { name: 'Admin', exact: true }).click();
    await titleStarts(page, 'Admin');
    await page.getByRole('button', { name: 'New token for web-rotator' }).click();
    const token = page.getByTestId('new-token');
    await token.waitFor({ timeout: 5000 });
    const fresh = (await token.innerText()).trim();
    assert.notEqual(fresh, users['web-rotator']);
    await page.waitForTimeout(2500);
    assert.equal((await token.innerText()).trim(), fresh, 'the new token left the screen');
    assert.equal(await page.getByLabel('Token', { exact: true }).count(), 0, 'signed out');
    assert.equal((await api('GET', '/api/v1/jobs?page_size=1', fresh)).status, 200);
    await page.getByRole('button', { name: 'Dismiss message' }).click();
    assert.equal(await token.count(), 0);
    users['web-rotator'] = fresh;
  });
});

test('at 390 px wide no page scrolls sideways', async t => {
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const page = await phone.newPage();
  try {
    await page.goto(url + '/');
    await page.getByLabel('Token', { exact: true }).fill(users['web-lead']);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('jobs').locator('[data-job-id]').first().waitFor({ timeout: 10000 });
    const widths = {};
    for (const p of ['jobs', `jobs/${formJob ? formJob.id : 1}`, 'team', 'cluster', 'chargeback']) {
      await page.goto(`${url}/#/${p}`);
      await page.locator('main h1').first().waitFor({ timeout: 10000 });
      await page.waitForTimeout(1000);
      widths[p] = await page.evaluate(() => document.documentElement.scrollWidth);
    }
    assert.ok(Object.values(widths).every(w => w <= 390), `wider than 390 px: ${JSON.stringify(widths)}`);
  } finally { await phone.close(); }
});

test('signing out ends the session', async t => {
  await withPage(t, async page => {
    await signIn(page, users['web-lead']);
    const before = (await context.cookies(url)).find(c => c.name === 'tessera_session').value;
    await signOut(page);
    const r = await fetch(url + '/api/v1/jobs', { headers: { Cookie: `tessera_session=${before}` } });
    assert.equal(r.status, 401);
  });
});
