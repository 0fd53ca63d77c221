// The API matches its description: docs/openapi.yaml validates with @apidevtools/swagger-parser, and every
// answer of a real `tessera serve` to a tour of every operation (successes and errors) has a status the
// description documents for that operation and a JSON body that matches the documented schema (ajv).
// Run: TESSERA_BINARY=build/tessera node --test tests/api/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const require = createRequire(path.join(root, 'web/package.json'));
const SwaggerParser = require('@apidevtools/swagger-parser');
const Ajv = require('ajv');
const binary = path.resolve(process.env.TESSERA_BINARY || path.join(root, 'build/tessera'));
const specPath = path.join(root, 'docs/openapi.yaml');

let server, dir, base, admin, spec;
const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
const seen = [];

function freePort() {
  return new Promise(resolve => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

before(async () => {
  spec = await SwaggerParser.dereference(specPath);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-openapi-'));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(binary, ['serve', '--db', path.join(dir, 't.db'), '--listen', `127.0.0.1:${port}`, '--speed', '60'],
    { stdio: 'ignore' });
  for (let i = 0; i < 300; i++) {
    try { if ((await fetch(`${base}/readyz`)).status === 200) break; } catch { /* not yet */ }
    await new Promise(r => setTimeout(r, 100));
  }
  admin = fs.readFileSync(path.join(dir, 't.db.admin-token'), 'utf8').trim();
});

after(() => {
  if (server) server.kill('SIGKILL');
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

// The operation of the description that a concrete path is an instance of.
function operationOf(method, urlPath) {
  for (const [template, item] of Object.entries(spec.paths)) {
    const re = new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$');
    if (re.test(urlPath) && item[method.toLowerCase()]) return { template, op: item[method.toLowerCase()] };
  }
  return null;
}

// Calls the API and checks the answer against the description; returns {status, json}.
async function call(method, urlPath, { body, token = admin, raw } = {}) {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined || raw !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + urlPath, { method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)) });
  const text = await res.text();
  const where = `${method} ${urlPath} -> ${res.status}`;
  const found = operationOf(method, urlPath.split('?')[0]);
  assert.ok(found, `${where}: no operation in docs/openapi.yaml`);
  const r = found.op.responses[String(res.status)];
  assert.ok(r, `${where}: status not documented for ${method} ${found.template} (${text.slice(0, 200)})`);
  let json = null;
  const type = res.headers.get('content-type') || '';
  if (type.startsWith('application/json')) {
    json = JSON.parse(text);
    const schema = r.content && r.content['application/json'] && r.content['application/json'].schema;
    assert.ok(schema, `${where}: a JSON body, but no JSON schema documented`);
    const validate = ajv.compile(schema);
    assert.ok(validate(json), `${where}: body does not match the schema: ${ajv.errorsText(validate.errors)}`);
  }
  seen.push(`${method} ${found.template}`);
  return { status: res.status, json };
}

test('docs/openapi.yaml is a valid OpenAPI description', async () => {
  await SwaggerParser.validate(specPath);
});

test('every answer of the tour is documented and matches its schema', async () => {
  const job = { name: 'j', class: 'training', gpus_per_worker: 1, memory_gib: 10, duration_s: 600, team: 'vision' };
  assert.equal((await call('POST', '/api/v1/teams', { body: { name: 'vision', guaranteed_gpus: 8, limit_gpus: 16 } })).status, 201);
  assert.equal((await call('POST', '/api/v1/teams', { body: { name: 'vision' } })).status, 409);
  assert.equal((await call('POST', '/api/v1/teams', { body: { name: 'Bad Name' } })).status, 400);
  await call('GET', '/api/v1/teams');
  await call('GET', '/api/v1/teams', { token: '' });
  const u = await call('POST', '/api/v1/users', { body: { name: 'ana', team: 'vision', role: 'member' } });
  assert.equal(u.status, 201);
  const member = u.json.token;
  await call('GET', '/api/v1/users');
  const leader = await call('GET', '/api/v1/leader', { token: member });  // one process: it leads
  assert.equal(leader.status, 200);
  assert.equal(leader.json.role, 'leader');
  assert.equal((await call('GET', '/api/v1/leader', { token: '' })).status, 401);
  const j = await call('POST', '/api/v1/jobs', { body: job });
  assert.equal(j.status, 201);
  const id = j.json.id;
  assert.equal((await call('POST', '/api/v1/jobs', { body: { ...job, name: 'x\u001b[2J' } })).status, 400);
  assert.equal((await call('POST', '/api/v1/jobs', { raw: '{' })).status, 400);
  await call('POST', '/api/v1/jobs', { body: { ...job, team: undefined }, token: member });
  assert.equal((await call('POST', '/api/v1/jobs', { body: { ...job, priority_class: 'production-inference', team: undefined }, token: member })).status, 403);
  await call('GET', '/api/v1/jobs?page_size=100000');
  assert.equal((await call('GET', '/api/v1/jobs?page_size=x')).status, 400);
  await call('GET', `/api/v1/jobs/${id}`);
  assert.equal((await call('GET', '/api/v1/jobs/999999')).status, 404);
  await call('GET', `/api/v1/jobs/${id}/whatif`);
  await call('PATCH', `/api/v1/jobs/${id}`, { body: { priority_class: 'training-high' } });
  await call('GET', '/api/v1/queue');
  await call('GET', '/api/v1/cluster');
  await call('GET', '/api/v1/cluster/history?max_points=10');
  await call('GET', '/api/v1/usage?group_by=project');
  assert.equal((await call('GET', '/api/v1/usage?from=99999999999999999999')).status, 400);
  await call('GET', '/api/v1/nodes');
  assert.equal((await call('GET', '/api/v1/nodes', { token: member })).status, 403);
  const node = { name: 'added', gpu: 'h100-80gb', gpus: 8, cpu: 192, memory_gib: 2048, interconnect: 'nvswitch' };
  assert.equal((await call('POST', '/api/v1/nodes', { body: node })).status, 201);
  assert.equal((await call('POST', '/api/v1/nodes', { body: node })).status, 409);
  assert.equal((await call('POST', '/api/v1/nodes', { body: { ...node, name: 'x', gpus: -1 } })).status, 400);
  await call('GET', '/api/v1/nodes/added');
  assert.equal((await call('GET', '/api/v1/nodes/nowhere')).status, 404);
  await call('POST', '/api/v1/nodes/added:cordon');
  await call('POST', '/api/v1/nodes/added:uncordon');
  await call('POST', '/api/v1/nodes/added:drain');
  assert.equal((await call('DELETE', '/api/v1/nodes/added')).status, 204);
  await call('POST', `/api/v1/jobs/${id}:cancel`);
  await call('POST', `/api/v1/jobs/${id}:cancel`);
  await call('PATCH', '/api/v1/teams/vision', { body: { limit_gpus: 20, allowed_priority_classes: ['training', 'inference'] } });
  await call('POST', '/api/v1/users/ana/token');
  await call('DELETE', '/api/v1/users/ana/token');
  await call('GET', '/api/v1/audit?target=team:vision');
  assert.equal((await call('GET', '/api/v1/audit', { token: member })).status, 401);  // revoked above
  const s = await call('POST', '/api/v1/session', { body: { token: admin }, token: '' });
  assert.equal(s.status, 200);
  assert.equal((await call('POST', '/api/v1/session', { body: { token: 'tsr_bad' }, token: '' })).status, 401);
  await call('GET', '/api/v1/session', { token: '' });
  const ops = new Set(seen);
  for (const [template, item] of Object.entries(spec.paths)) {
    for (const m of ['get', 'post', 'patch', 'put', 'delete']) {
      if (item[m] && template.startsWith('/api/v1') && template !== '/api/v1/session')
        assert.ok(ops.has(`${m.toUpperCase()} ${template}`), `the tour skips ${m.toUpperCase()} ${template}`);
    }
  }
});
