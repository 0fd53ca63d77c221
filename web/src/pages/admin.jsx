import { useEffect, useState } from 'preact/hooks';
import { api, listOf } from '../api.js';
import { usePoll, gpuField, gpuText } from '../util.js';
import { announce } from '../announce.jsx';

// Lowest first: the role select starts at the role with the fewest rights.
const ROLES = ['viewer', 'member', 'team-lead', 'admin'];

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
      {result && <p class="sub">Done.</p>}
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
              <td>{t.name}</td><td class="num">{gpuText(gpuField(t, 'guaranteed'))}</td>
              <td class="num">{(gpuField(t, 'limit') ?? -1) < 0 ? 'no limit' : gpuText(gpuField(t, 'limit'))}</td>
              <td class="num">{gpuText(gpuField(t, 'allocated'))}</td>
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

// Users and their tokens: a user has one API token; "New token" replaces it (shown once), "Revoke" ends it.
function Users({ me, reloadKey }) {
  const { data, error, reload } = usePoll(async () => listOf(await api('GET', '/api/v1/users'), 'users'), [reloadKey], 0);
  const [confirm, setConfirm] = useState('');
  const act = async (u, revoke) => {
    setConfirm('');
    try {
      const r = await api(revoke ? 'DELETE' : 'POST', `/api/v1/users/${encodeURIComponent(u.name)}/token`);
      if (revoke) announce(`Revoked the token of ${u.name}.`);
      else announce(`New token for ${u.name}${u.name === me.user ? ' (your own; this session carries on with it)' : ''}, shown once — copy it now:`, { token: r.token });
      reload();
    } catch (x) { announce(`Could not change the token of ${u.name}: ${x.message}`, { error: true }); }
  };
  return (
    <>
      <h2>Users and tokens</h2>
      {error && <p class="error" role="alert">Could not list users: {error.message}</p>}
      <table class="compact">
        <thead><tr><th scope="col">User</th><th scope="col">Team</th><th scope="col">Role</th><th scope="col">Token</th><th scope="col">Actions</th></tr></thead>
        <tbody>{(data || []).map(u => (
          <tr key={u.name}>
            <td>{u.name}</td><td>{u.team || '—'}</td><td>{u.role}</td><td>{u.token_active === false ? 'revoked' : 'active'}</td>
            <td class="row-actions">
              {(me.role === 'admin' || u.role !== 'admin') && <>
                <button type="button" class="secondary small" aria-label={`New token for ${u.name}`} onClick={() => act(u, false)}>New token</button>
                {u.token_active !== false && (confirm === u.name
                  ? <button type="button" class="danger small" aria-label={`Confirm revoke of ${u.name}'s token`} onClick={() => act(u, true)}>Confirm revoke</button>
                  : <button type="button" class="secondary small" aria-label={`Revoke ${u.name}'s token`} onClick={() => setConfirm(u.name)}>Revoke</button>)}
              </>}
            </td>
          </tr>
        ))}</tbody>
      </table>
    </>
  );
}

// The latest changes (the audit log's last 50 entries of its first 1,000), newest first; admins only.
function Audit({ reloadKey }) {
  const [rows, setRows] = useState(null);
  const [error, setError] = useState('');
  useEffect(() => {
    api('GET', '/api/v1/audit?page_size=1000')
      .then(j => setRows(((j && j.entries) || []).slice(-50).reverse()))
      .catch(e => setError(e.message));
  }, [reloadKey]);
  const text = v => (v == null ? '' : JSON.stringify(v));
  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title">Audit log</h2>
      {error && <p role="alert">{error}</p>}
      {rows && (
        <table>
          <thead><tr><th>time</th><th>actor</th><th>action</th><th>target</th><th>from</th><th>before</th><th>after</th></tr></thead>
          <tbody>
            {rows.map(r => (
              <tr key={r.id}><td>{r.time}</td><td>{r.actor}</td><td>{r.action}{r.changed ? '' : ' (no change)'}</td>
                <td>{r.target}</td><td>{r.source}</td><td>{text(r.before)}</td><td>{text(r.after)}</td></tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
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
      <Users me={me} reloadKey={k} />
      <ApiForm title="Create a user" submitLabel="Create user"
        fields={[{ name: 'name', label: 'User name' }, { name: 'team', label: 'Team', value: me.team || '' },
          { name: 'role', label: 'Role', value: 'viewer', options: me.role === 'admin' ? ROLES : ROLES.filter(r => r !== 'admin') }]}
        onSubmit={async v => { const r = await api('POST', '/api/v1/users', { name: v.name, team: v.team, role: v.role }); bump(); announce(`Created user ${r.name} (${r.role}); their token, shown once:`, { token: r.token }); return { ...r, token: undefined }; }} />
      {me.role === 'admin' && <Audit reloadKey={k} />}
    </section>
  );
}
