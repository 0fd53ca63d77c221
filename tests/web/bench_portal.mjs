// Portal responsiveness with 1,000 jobs on 512 GPUs: starts `tessera serve` on the 512-GPU example
// cluster, submits 1,000 one-GPU jobs (512 run, the rest wait), and measures in Debian's chromium:
// the sign-in page's time to usable, the jobs table's time to its first page of rows (the list is paged
// on the server), the longest main-thread task and the bytes of API answers while the table polls for
// 20 s, and the cluster page's time to draw 512 GPUs and its longest task.
//   TESSERA_BINARY=build/tessera node tests/web/bench_portal.mjs   (prints one JSON line)
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { chromium } = createRequire(path.join(root, 'web/package.json'))('playwright-core');
const binary = path.resolve(process.env.TESSERA_BINARY || path.join(root, 'build/tessera'));
const JOBS = 1000;

const port = await new Promise(r => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => r(p)); }); });
const url = `http://127.0.0.1:${port}`;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-web-bench-'));
const db = path.join(dir, 't.db');
const server = spawn(binary, ['serve', '--db', db, '--listen', `127.0.0.1:${port}`, '--cluster',
  path.join(root, 'examples/clusters/h100-512-8leaf.yaml'), '--speed', '1'], { cwd: dir, stdio: 'ignore' });
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu',
  '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
try {
  for (let i = 0; i < 300; i++) { try { if ((await fetch(url + '/readyz')).ok) break; } catch (e) { /* starting */ } await new Promise(r => setTimeout(r, 200)); }
  const admin = fs.readFileSync(`${db}.admin-token`, 'utf8').trim();
  const call = (m, p, b, t = admin) => fetch(url + p, { method: m, headers: { Authorization: `Bearer ${t}`, 'Content-Type': 'application/json' }, body: b && JSON.stringify(b) }).then(r => r.json());
  await call('POST', '/api/v1/teams', { name: 'bench', guaranteed_gpus: 512, limit_gpus: 512 });
  const lead = await call('POST', '/api/v1/users', { name: 'bench-lead', team: 'bench', role: 'team-lead' });
  for (let i = 0; i < JOBS; i += 50) {
    await Promise.all(Array.from({ length: 50 }, (_, k) => call('POST', '/api/v1/jobs',
      { name: `bench-${i + k}`, class: 'training', workers: 1, gpus_per_worker: 1, memory_gib: 10, duration_s: 86400 }, lead.token)));
  }
  await new Promise(r => setTimeout(r, 3000)); // a cycle or two places what fits
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.addInitScript(() => {
    window.__long = [];
    new PerformanceObserver(l => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({ type: 'longtask', buffered: true });
  });
  await page.goto(url + '/');
  let t = Date.now();
  await page.goto(url + '/');
  await page.getByLabel('Token', { exact: true }).waitFor();
  const signInMs = Date.now() - t;
  await page.getByLabel('Token', { exact: true }).fill(lead.token);
  t = Date.now();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="jobs"] [data-job-id]').length >= 1, null, { timeout: 60000 });
  const jobsMs = Date.now() - t;
  const rows = await page.locator('[data-testid="jobs"] [data-job-id]').count();
  await page.evaluate(() => { window.__long = []; });
  let bytes = 0, answers = 0;
  const count = r => { if (new URL(r.url()).pathname.startsWith('/api/')) { answers++; r.body().then(b => { bytes += b.length; }).catch(() => {}); } };
  page.on('response', count);
  await page.waitForTimeout(20000);
  page.off('response', count);
  const jobsLong = await page.evaluate(() => window.__long.slice());
  t = Date.now();
  await page.getByRole('link', { name: 'Cluster', exact: true }).click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="gpu"]').length >= 512, null, { timeout: 60000 });
  const clusterMs = Date.now() - t;
  await page.evaluate(() => { window.__long = []; });
  await page.waitForTimeout(10000);
  const clusterLong = await page.evaluate(() => window.__long.slice());
  console.log(JSON.stringify({
    jobs: JOBS, gpus: 512, sign_in_page_ms: signInMs, jobs_first_rows_ms: jobsMs, rows_shown: rows,
    poll_answers_20s: answers, poll_bytes_20s: bytes,
    jobs_poll_longest_task_ms: Math.round(Math.max(0, ...jobsLong)), jobs_poll_long_tasks: jobsLong.length,
    cluster_page_ms: clusterMs, cluster_poll_longest_task_ms: Math.round(Math.max(0, ...clusterLong)),
  }));
} finally {
  await browser.close();
  server.kill('SIGTERM');
  await new Promise(r => { server.once('exit', r); setTimeout(r, 10000); });
  fs.rmSync(dir, { recursive: true, force: true });
}
