// Takes the screenshots in docs/portal/ from a running `tessera serve --demo`:
//   node tests/web/screenshots.mjs URL LEAD_TOKEN ADMIN_TOKEN OUT_DIR
// (LEAD_TOKEN: a team lead's, e.g. vision-lead's as `tessera serve --demo` prints it).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { chromium } = createRequire(path.join(root, 'web/package.json'))('playwright-core');
const [url, lead, admin, out] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox',
  '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
const page = await context.newPage();
const shot = (name, full = false) => page.screenshot({ path: path.join(out, `${name}.png`), fullPage: full });
async function signIn(token) {
  await context.clearCookies();
  await page.goto(url + '/');
  await page.getByLabel('Token', { exact: true }).waitFor();
  await shot('signin');
  await page.getByLabel('Token', { exact: true }).fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('jobs').waitFor();
  await page.waitForTimeout(2500);
}
try {
  await signIn(lead);
  await shot('jobs');
  await page.getByRole('button', { name: 'New job' }).click();
  const form = page.getByTestId('submit-job');
  await form.getByLabel('Name', { exact: true }).fill('finetune-13b');
  await form.getByLabel('Workers', { exact: true }).fill('2');
  await form.getByLabel('GPUs per worker', { exact: true }).fill('9');
  await form.getByRole('button', { name: 'Submit', exact: true }).click();
  await page.getByTestId('error-gpus_per_worker').waitFor();
  await shot('submit');
  await form.getByLabel('GPUs per worker', { exact: true }).fill('8');
  await form.getByRole('button', { name: 'Submit', exact: true }).click();
  const row = page.getByTestId('jobs').locator('[data-job-id]', { hasText: 'finetune-13b' }).first();
  await row.waitFor();
  await page.waitForTimeout(2500);
  await row.getByRole('link').first().click();
  await page.getByRole('heading', { name: 'Timeline' }).waitFor();
  await page.waitForTimeout(3500);
  await shot('job', true);
  for (const [name, link] of [['team', 'Team'], ['cluster', 'Cluster'], ['chargeback', 'Chargeback']]) {
    await page.getByRole('link', { name: link, exact: true }).click();
    await page.waitForTimeout(3500);
    await shot(name, true);
  }
  // History: ended jobs through the state filter; then the jobs page on a 390 px phone.
  await page.getByRole('link', { name: 'Jobs', exact: true }).click();
  await page.getByLabel('State', { exact: true }).selectOption({ label: 'All' });
  await page.waitForTimeout(2500);
  await shot('history');
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
  const p2 = await phone.newPage();
  await p2.goto(url + '/');
  await p2.getByLabel('Token', { exact: true }).fill(lead);
  await p2.getByRole('button', { name: 'Sign in' }).click();
  await p2.getByTestId('jobs').locator('[data-job-id]').first().waitFor();
  await p2.waitForTimeout(2500);
  await p2.screenshot({ path: path.join(out, 'phone.png') });
  await phone.close();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await signIn(admin);
  await page.getByRole('link', { name: 'Admin', exact: true }).click();
  await page.waitForTimeout(2500);
  await shot('admin');
  // A new token, shown once until dismissed (here the admin's own: the session carries on with it).
  await page.getByRole('button', { name: 'New token for admin' }).click();
  await page.getByTestId('new-token').waitFor();
  await shot('token');
} finally {
  await browser.close();
}
