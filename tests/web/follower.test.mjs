// The portal on a follower replica: two `tessera serve --store` replicas on a private PostgreSQL server
// (initdb into a temporary folder, a Unix socket there; as user `postgres` when run as root). Signed in on
// the follower, the portal says where the leader is before any write, a write answered 503 with
// Tessera-Leader names the leader and lands nowhere, and on the leader the same form submits.
//   TESSERA_BINARY=build/tessera node --test tests/web/follower.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
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
const asRoot = process.getuid && process.getuid() === 0;
let pg, dir, browser, adminToken, leadToken;
const replicas = [];

function pgBin() {
  const base = '/usr/lib/postgresql';
  const versions = fs.existsSync(base) ? fs.readdirSync(base).filter(v => fs.existsSync(path.join(base, v, 'bin/initdb'))) : [];
  versions.sort((a, b) => Number(a) - Number(b));
  return versions.length ? path.join(base, versions.at(-1), 'bin') : '/usr/bin';
}

function pgRun(args) {
  const [cmd, rest] = asRoot ? ['runuser', ['-u', 'postgres', '--', ...args]] : [args[0], args.slice(1)];
  const r = spawnSync(cmd, rest, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${args[0]} failed: ${r.stderr || r.stdout}`);
}

function startPostgres() {
  const bin = pgBin();
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-web-pg-'));
  const sock = path.join(d, 'sock');
  fs.mkdirSync(sock);
  if (asRoot) spawnSync('chown', ['-R', 'postgres:postgres', d]);
  pgRun([`${bin}/initdb`, '-D', `${d}/data`, '-U', 'tessera', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
  pgRun([`${bin}/pg_ctl`, '-D', `${d}/data`, '-l', `${d}/server.log`, '-w', '-o',
    `-c listen_addresses='' -c unix_socket_directories='${sock}' -c fsync=off`, 'start']);
  pgRun([`${bin}/createdb`, '-h', sock, '-U', 'tessera', 'tessera']);
  return { dir: d, bin, uri: `postgresql://tessera@localhost/tessera?host=${sock}` };
}

async function startReplica(i) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = fs.openSync(path.join(dir, `replica-${i}.log`), 'a');
  const proc = spawn(binary, ['serve', '--store', pg.uri, '--listen', `127.0.0.1:${port}`, '--advertise', url,
    '--lease-seconds', '3', '--cluster', path.join(dir, 'cluster.yaml'), '--admin-token-file',
    path.join(dir, 'admin-token')], { stdio: ['ignore', log, log] });
  await waitFor(async () => (await fetch(url + '/healthz')).ok, `replica ${i} up`);
  return { url, proc };
}

const readyz = async r => (await fetch(r.url + '/readyz').catch(() => ({ status: 0 }))).status;

before(async () => {
  assert.ok(chromiumPath, 'chromium is not installed');
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-web-follower-'));
  fs.writeFileSync(path.join(dir, 'cluster.yaml'), 'name: t\ndefaults: {gpu: h100-80gb, gpus: 8, cpu: 192, ' +
    'memory_gib: 2048, interconnect: nvswitch, spine: s, tier: reserved}\nnodes:\n  - {name: node, count: 2, leaf: leaf-0}\n');
  pg = startPostgres();
  replicas.push(await startReplica(0), await startReplica(1));
  await waitFor(async () => (await Promise.all(replicas.map(readyz))).filter(s => s === 200).length === 1, 'one leader');
  adminToken = fs.readFileSync(path.join(dir, 'admin-token'), 'utf8').trim();
  const leader = await leaderOf();
  assert.equal((await apiCall(leader.url, 'POST', '/api/v1/teams', adminToken, { name: 'web', guaranteed_gpus: 8 })).status, 201);
  const u = await apiCall(leader.url, 'POST', '/api/v1/users', adminToken, { name: 'lead', team: 'web', role: 'team-lead' });
  assert.equal(u.status, 201, u.text);
  leadToken = u.json.token;
  // A follower's view of the database lags the leader by up to its refresh (docs/high-availability.md): the
  // user just made is known there once a read with its token is answered.
  const follower = await leaderOf(503);
  await waitFor(async () => (await apiCall(follower.url, 'GET', '/api/v1/jobs', leadToken)).status === 200,
    'the follower to know the new user', 20000, 1000);  // a poll a second: wrong tokens are rate-limited
  browser = await chromium.launch({ executablePath: chromiumPath, args: CHROMIUM_ARGS });
});

after(async () => {
  if (browser) await browser.close();
  for (const r of replicas) r.proc.kill('SIGKILL');
  if (pg) {
    try { pgRun([`${pg.bin}/pg_ctl`, '-D', `${pg.dir}/data`, '-m', 'immediate', '-w', 'stop']); } catch (e) { /* gone */ }
    fs.rmSync(pg.dir, { recursive: true, force: true });
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

async function leaderOf(want = 200) {
  return waitFor(async () => {
    for (const r of replicas) if (await readyz(r) === want) return r;
    return null;
  }, want === 200 ? 'the leader' : 'a follower');
}

async function submitFromForm(page, name) {
  await page.getByRole('button', { name: 'New job' }).click();
  const form = page.getByTestId('submit-job');
  await form.getByLabel('Name', { exact: true }).fill(name);
  await form.getByRole('button', { name: 'Submit', exact: true }).click();
  return form;
}

test('on a follower the portal names the leader, and a write sent there lands nowhere', async t => {
  const follower = await leaderOf(503), leader = await leaderOf(200);
  const context = await browser.newContext();
  const page = await context.newPage();
  try {
    await page.goto(follower.url + '/');
    await page.getByLabel('Token', { exact: true }).fill(leadToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('jobs').waitFor({ state: 'attached', timeout: 10000 });
    const banner = page.getByTestId('leader-banner');
    await banner.waitFor({ timeout: 10000 });
    assert.equal(await banner.getByRole('link').getAttribute('href'), leader.url + '/');
    const said = await submitFromForm(page, 'from-the-follower');
    await waitFor(async () => (await said.textContent()).includes(leader.url), 'the error naming the leader', 10000);
    assert.match(await said.textContent(), /only reads/);
    const jobs = await apiCall(leader.url, 'GET', '/api/v1/jobs', adminToken);
    assert.equal(jobs.status, 200);
    assert.ok(!jobs.json.jobs.some(j => j.name === 'from-the-follower'), 'the follower\'s write landed');

    await page.goto(leader.url + '/');
    await page.getByLabel('Token', { exact: true }).fill(leadToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('jobs').waitFor({ state: 'attached', timeout: 10000 });
    assert.equal(await page.getByTestId('leader-banner').count(), 0, 'the leader shows the follower banner');
    await submitFromForm(page, 'from-the-leader');
    await waitFor(async () => (await apiCall(leader.url, 'GET', '/api/v1/jobs', adminToken)).json.jobs
      .some(j => j.name === 'from-the-leader'), 'the job submitted on the leader', 10000);
  } catch (e) {
    fs.mkdirSync(artifacts, { recursive: true });
    const file = path.join(artifacts, 'follower.png');
    await page.screenshot({ path: file, fullPage: true }).catch(() => {});
    e.message += ` (screenshot: ${file})`;
    throw e;
  } finally {
    await context.close();
  }
});
