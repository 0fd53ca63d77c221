import { useState } from 'preact/hooks';
import { api, listOf } from '../api.js';
import { usePoll, gpuField, ago } from '../util.js';

const ROLES = ['member', 'team-lead', 'viewer', 'admin'];

// A small form whose fields post as one JSON body; shows the server's message next to the field it names.
function ApiForm({ title, fields, submitLabel, onSubmit }) {
  const init = Object.fromEntries(fields.map(f => [f.name, f.value ?? '']));
  const [v, setV] = useState(init);
  const [err, setErr] = useState({});
  const [result, setResult] = useState(null);
  const go = async e => {
    e.preventDefault();
    setErr({});
    setResult(null);
    try { setResult(await onSubmit(v)); setV(init); } catch (x) { setErr({ [x.field || '_']: x.message }); }
  };
  const id = title.toLowerCase().replace(/\W+/g, '-');
  return (
    <form class="inline-form" onSubmit={go} novalidate aria-labelledby={id}>
      <h3 id={id}>{title}</h3>
      {fields.map(f => (
        <div class="field" key={f.name}>
          <label for={`${id}-${f.name}`}>{f.label}</label>
          {f.options
            ? <select id={`${id}-${f.name}`} value={v[f.name]} onChange={e => setV({ ...v, [f.name]: e.currentTarget.value })}>
                {f.options.map(o => <option key={o} value={o}>{o}</option>)}</select>
            : <input id={`${id}-${f.name}`} type={f.type || 'text'} value={v[f.name]} aria-invalid={err[f.name] ? 'true' : undefined}
                aria-describedby={err[f.name] ? `${id}-${f.name}-err` : undefined}
                onInput={e => setV({ ...v, [f.name]: e.currentTarget.value })} />}
          {err[f.name] && <p class="error" id={`${id}-${f.name}-err`} data-testid={`error-${f.name}`}>{err[f.name]}</p>}
        </div>
      ))}
      <button type="submit">{submitLabel}</button>
      {err._ && <p class="error" role="alert">{err._}</p>}
      {result && result.token && (
        <p role="status" class="token-once">New token (shown once): <output><code>{result.token}</code></output></p>
      )}
      {result && !result.token && <p role="status">Done.</p>}
    </form>
  );
}

function Teams({ me, reloadKey }) {
  const { data, error, reload } = usePoll(async () => listOf(await api('GET', '/api/v1/teams'), 'teams'), [reloadKey], 0);
  const [edit, setEdit] = useState(null);
  const save = async e => {
    e.preventDefault();
    try {
      await api('PATCH', `/api/v1/teams/${encodeURIComponent(edit.name)}`, { guaranteed_gpus: Number(edit.g), limit_gpus: Number(edit.l) });
      setEdit(null);
      reload();
    } catch (x) { setEdit({ ...edit, error: x.message }); }
  };
  return (
    <>
      <h2>Teams and quotas</h2>
      {error && <p class="error" role="alert">{error.message}</p>}
      <table class="compact">
        <thead><tr><th scope="col">Team</th><th scope="col" class="num">Guaranteed GPUs</th><th scope="col" class="num">Limit GPUs</th>
          <th scope="col" class="num">Allocated</th><th scope="col">Quota</th></tr></thead>
        <tbody>
          {(data || []).map(t => (
            <tr key={t.name}>
              <td>{t.name}</td><td class="num">{gpuField(t, 'guaranteed') ?? '—'}</td>
              <td class="num">{(gpuField(t, 'limit') ?? -1) < 0 ? 'none' : gpuField(t, 'limit')}</td>
              <td class="num">{gpuField(t, 'allocated') ?? '—'}</td>
              <td>{me.role === 'admin' && (edit && edit.name === t.name ? (
                <form class="row-actions" onSubmit={save}>
                  <label for="q-g">Guaranteed</label><input id="q-g" type="number" min="0" value={edit.g} onInput={e => setEdit({ ...edit, g: e.currentTarget.value })} />
                  <label for="q-l">Limit</label><input id="q-l" type="number" min="-1" value={edit.l} onInput={e => setEdit({ ...edit, l: e.currentTarget.value })} />
                  <button type="submit">Save</button><button type="button" class="secondary" onClick={() => setEdit(null)}>Cancel edit</button>
                  {edit.error && <span class="error" role="alert">{edit.error}</span>}
                </form>
              ) : <button type="button" class="secondary" aria-label={`Edit quota of ${t.name}`}
                    onClick={() => setEdit({ name: t.name, g: gpuField(t, 'guaranteed') ?? 0, l: gpuField(t, 'limit') ?? -1 })}>Edit</button>)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Users({ reloadKey }) {
  const { data, error } = usePoll(async () => listOf(await api('GET', '/api/v1/users'), 'users'), [reloadKey], 0);
  return (
    <>
      <h2>Users</h2>
      {error && <p class="error" role="alert">Could not list users: {error.message}</p>}
      <table class="compact">
        <thead><tr><th scope="col">User</th><th scope="col">Team</th><th scope="col">Role</th></tr></thead>
        <tbody>{(data || []).map(u => <tr key={u.name}><td>{u.name}</td><td>{u.team || '—'}</td><td>{u.role}</td></tr>)}</tbody>
      </table>
    </>
  );
}

function Tokens({ reloadKey, bump }) {
  const { data, error, reload } = usePoll(async () => listOf(await api('GET', '/api/v1/tokens'), 'tokens'), [reloadKey], 0);
  const [msg, setMsg] = useState('');
  const revoke = async t => {
    try { await api('DELETE', `/api/v1/tokens/${encodeURIComponent(t.id)}`); setMsg(`Revoked token ${t.id} of ${t.user}.`); reload(); } catch (x) { setMsg(x.message); }
  };
  return (
    <>
      <h2>Tokens</h2>
      {error && <p class="error" role="alert">Could not list tokens: {error.message}</p>}
      <p role="status">{msg}</p>
      <table class="compact">
        <thead><tr><th scope="col">Token</th><th scope="col">User</th><th scope="col">Created</th><th scope="col">Action</th></tr></thead>
        <tbody>{(data || []).map(t => (
          <tr key={t.id}><td><code>{t.id}</code></td><td>{t.user}</td><td>{ago(t.created_at)}</td>
            <td><button type="button" class="danger" aria-label={`Revoke token ${t.id} of ${t.user}`} onClick={() => revoke(t)}>Revoke</button></td></tr>
        ))}</tbody>
      </table>
      <ApiForm title="Create a token" submitLabel="Create token" fields={[{ name: 'user', label: 'User' }]}
        onSubmit={async v => { const r = await api('POST', '/api/v1/tokens', { user: v.user }); bump(); return r; }} />
    </>
  );
}

export function Admin({ me }) {
  const [k, setK] = useState(0);
  const bump = () => setK(k + 1);
  if (me.role !== 'admin' && me.role !== 'team-lead') {
    return <section><h1 tabIndex={-1}>Admin</h1><p>Administration needs the admin or team-lead role; you are {me.role}.</p></section>;
  }
  return (
    <section aria-labelledby="admin-title">
      <h1 id="admin-title" tabIndex={-1}>Admin</h1>
      <Teams me={me} reloadKey={k} />
      {me.role === 'admin' && (
        <ApiForm title="Create a team" submitLabel="Create team"
          fields={[{ name: 'name', label: 'Team name' }, { name: 'guaranteed_gpus', label: 'Guaranteed GPUs', type: 'number', value: '0' },
            { name: 'limit_gpus', label: 'Limit GPUs', type: 'number', value: '-1' }]}
          onSubmit={async v => { const r = await api('POST', '/api/v1/teams', { name: v.name, guaranteed_gpus: Number(v.guaranteed_gpus), limit_gpus: Number(v.limit_gpus) }); bump(); return r; }} />
      )}
      <Users reloadKey={k} />
      <ApiForm title="Create a user" submitLabel="Create user"
        fields={[{ name: 'name', label: 'User name' }, { name: 'team', label: 'Team', value: me.team || '' },
          { name: 'role', label: 'Role', options: me.role === 'admin' ? ROLES : ROLES.filter(r => r !== 'admin') }]}
        onSubmit={async v => { const r = await api('POST', '/api/v1/users', { name: v.name, team: v.team, role: v.role }); bump(); return r; }} />
      <Tokens reloadKey={k} bump={bump} />
    </section>
  );
}
