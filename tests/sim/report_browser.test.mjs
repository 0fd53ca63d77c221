// The simulation report in a real browser: `tessera simulate report` on a tiny scenario and a small curves
// file, opened from disk in Debian's chromium through playwright-core. The page renders without errors,
// every chart draws, each series of a chart has its own colour (checked on the rendered pixels), each policy
// keeps one colour across charts, the bound is drawn, tables are HTML tables and the zoomed fragmentation
// view spans 80-130 % load. Run by ctest (test report_browser) or directly:
//   TESSERA_BINARY=build/tessera node --test tests/sim/report_browser.test.mjs
// The screenshot is kept in $TESSERA_WEB_ARTIFACTS (default build/web-test-results)/report.png.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { chromium } = createRequire(path.join(root, 'web/package.json'))('playwright-core');
const binary = path.resolve(process.env.TESSERA_BINARY || path.join(root, 'build/tessera'));
const artifacts = process.env.TESSERA_WEB_ARTIFACTS || path.join(root, 'build/web-test-results');
const chromiumPath = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(p => fs.existsSync(p));

function writeInputs(dir) {
  fs.writeFileSync(path.join(dir, 'c.yaml'), 'name: c16\ndefaults: {gpus: 8, cpu: 192, memory_gib: 2048, ' +
    'interconnect: nvswitch}\nnodes:\n  - {name: h, count: 2, gpu: h100-80gb, leaf: leaf-0}\n');
  fs.writeFileSync(path.join(dir, 's.yaml'), 'name: tiny\ncluster: c.yaml\nseeds: 2\nthreads: 2\n' +
    'policies: [tessera, bestfit, k8s-default, static-mig]\nhorizon_h: 24\nwarmup_h: 2\n' +
    'arrivals: {process: backlog, depth: 8}\nworkload: {inference_share: 0.5}\n');
  const rows = ['policy,seed,pod,load,alloc'];
  ['fgd', 'bestfit', 'tessera'].forEach((p, k) => {
    for (const seed of [42, 43])
      for (let i = 0; i <= 130; i += 2)
        rows.push(`${p},${seed},${i},${i + 0.3},${Math.min(i, 100 - 0.02 * (k + 1) * Math.max(0, i - 80) ** 1.2)}`);
  });
  fs.writeFileSync(path.join(dir, 'curves.csv'), rows.join('\n') + '\n');
}

const hex = c => [1, 3, 5].map(i => parseInt(c.slice(i, i + 2), 16));

test('the report renders each series in its own colour', { timeout: 180000 }, async () => {
  assert.ok(chromiumPath, 'Debian chromium is installed');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-report-'));
  writeInputs(dir);
  const out = path.join(dir, 'out');
  execFileSync(binary, ['simulate', 'report', '--out', out, '--scenario', path.join(dir, 's.yaml'),
    '--fgd-curves', path.join(dir, 'curves.csv'), '--fgd-trace', path.join(dir, 'no-trace')], { stdio: 'pipe' });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors = [];
    page.on('pageerror', e => errors.push(e.message));
    await page.goto('file://' + path.join(out, 'index.html'));
    await page.waitForFunction(() => window.REPORT_READY === true, null, { timeout: 30000 });
    fs.mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'report.png'), fullPage: true });
    assert.deepEqual(errors, []);
    // HTML tables with one row per policy plus the bound.
    const rows = await page.$$eval('table tr', trs => trs.map(tr => tr.textContent));
    for (const p of ['tessera', 'bestfit', 'k8s-default', 'static-mig', 'bound'])
      assert.ok(rows.some(r => r.startsWith(p)), `a table row for ${p}`);
    const charts = await page.evaluate(() => Object.values(Chart.instances).map(c => ({
      title: c.canvas.parentNode.dataset.title,
      xmin: c.scales.x.min, xmax: c.scales.x.max,
      sets: c.data.datasets.map(d => ({ label: d.label, color: d.borderColor, points: d.data.length })),
    })));
    const titles = charts.map(c => c.title);
    for (const t of ['Utilisation over time (first seed)', 'Utilisation by class (mean over seeds)', 'Zoom: 80-130 % arrived load'])
      assert.ok(titles.includes(t), `chart ${t} in ${titles}`);
    const zoom = charts.find(c => c.title.startsWith('Zoom'));
    assert.equal(zoom.xmin, 80);
    assert.equal(zoom.xmax, 130);
    assert.ok(charts.find(c => c.title.startsWith('Utilisation over time')).sets.some(s => s.label === 'bound'));
    const colourOf = {};
    for (const c of charts) {
      const colours = c.sets.map(s => s.color);
      assert.equal(new Set(colours).size, colours.length, `one colour per series in ${c.title}: ${colours}`);
      for (const s of c.sets) {
        const key = s.label.replace(/^ours /, '');
        colourOf[key] ??= s.color;
        assert.equal(colourOf[key], s.color, `${key} keeps one colour (${c.title})`);
      }
    }
    // The rendered pixels: every series with points shows its colour somewhere on its canvas.
    const missing = await page.evaluate(([charts, rgb]) => {
      const out = [];
      for (const c of Object.values(Chart.instances)) {
        const ctx = c.canvas.getContext('2d');
        const px = ctx.getImageData(0, 0, c.canvas.width, c.canvas.height).data;
        for (const d of c.data.datasets) {
          if (!d.data.length) continue;
          const [r, g, b] = rgb[d.borderColor];
          let n = 0;
          for (let i = 0; i < px.length; i += 4)
            if (Math.abs(px[i] - r) < 10 && Math.abs(px[i + 1] - g) < 10 && Math.abs(px[i + 2] - b) < 10 && px[i + 3] > 200) n++;
          if (n < 5) out.push(`${c.canvas.parentNode.dataset.title}: ${d.label} (${d.borderColor}) ${n} px`);
        }
      }
      return out;
    }, [charts, Object.fromEntries(charts.flatMap(c => c.sets.map(s => [s.color, hex(s.color)])))]);
    assert.deepEqual(missing, []);
  } finally {
    await browser.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
