import { useMemo, useState } from 'preact/hooks';
import { api, allPages, listOf } from '../api.js';
import { usePoll, ago, until, gpus as fmtGpus, reasonText } from '../util.js';
import { canChange, gpuCount, positionOf, tasksOf, tasksRunning, PRIORITY_CLASSES } from '../jobmodel.js';
import { SubmitForm } from './submit.jsx';

async function loadJobs() {
  const [running, pending, queue] = await Promise.all([
    allPages('/api/v1/jobs?state=Running&page_size=1000', 'jobs'),
    allPages('/api/v1/jobs?state=Pending&page_size=1000', 'jobs'),
    api('GET', '/api/v1/queue').catch(() => null),
    api('GET', '/api/v1/session').catch(() => null), // keeps the service clock estimate current
  ]);
  const q = new Map(listOf(queue, 'jobs').map(e => [String(e.id), e]));
  return { running, pending, queue: q };
}

// Merges a pending job with its queue entry (position, reason, estimated start from the last cycle).
function pendingInfo(job, q) {
  const e = q.get(String(job.id)) || {};
  return {
    pos: positionOf(e.pool_position !== undefined || e.team_position !== undefined ? e : job),
    reason: reasonText(e.reason || job.reason) || e.message || '',
    code: (e.reason && e.reason.code) || (job.reason && job.reason.code) || '',
    estimated: e.estimated_start ?? job.estimated_start,
  };
}

export function JobActions({ me, job, onChanged, compact, only }) {
  const [confirm, setConfirm] = useState(false);
  const [error, setError] = useState('');
  if (!canChange(me, job) || !(job.state === 'Pending' || job.state === 'Running')) return null;
  const act = async (method, path, body) => {
    setError('');
    try { await api(method, path, body); onChanged && onChanged(); } catch (e) { setError(e.message); }
  };
  const id = encodeURIComponent(job.id);
  const classes = PRIORITY_CLASSES.includes(job.priority_class) ? PRIORITY_CLASSES : [job.priority_class, ...PRIORITY_CLASSES];
  const prio = (
    <>
      <label class={compact ? 'sr-only' : ''} for={`prio-${job.id}`}>Priority class{compact ? ` of ${job.name}` : ''}</label>
      <select id={`prio-${job.id}`} value={job.priority_class}
        onChange={e => act('PATCH', `/api/v1/jobs/${id}`, { priority_class: e.currentTarget.value })}>
        {classes.map(c => <option key={c} value={c}>{c}</option>)}
      </select>
    </>
  );
  if (only === 'priority') return <div class="row-actions">{prio}{error && <span class="error" role="alert">{error}</span>}</div>;
  return (
    <div class="row-actions">
      {only !== 'cancel' && prio}
      {confirm
        ? <button type="button" class="danger" aria-label={`Confirm cancel of ${job.name}`}
            onClick={() => { setConfirm(false); act('POST', `/api/v1/jobs/${id}:cancel`); }}>Confirm cancel</button>
        : <button type="button" class="secondary" aria-label={`Cancel ${job.name}`} onClick={() => setConfirm(true)}>Cancel</button>}
      {error && <span class="error" role="alert">{error}</span>}
    </div>
  );
}

function JobRow({ job, info, me, reload }) {
  const n = tasksOf(job);
  const running = job.state === 'Running';
  const state = running && n > 1 ? `Running ${tasksRunning(job)}/${n}` : job.state;
  const g = gpuCount(job);
  return (
    <tr data-job-id={job.id} class={`st-${job.state.toLowerCase()}`}>
      <td><a href={`#/jobs/${encodeURIComponent(job.id)}`}>{job.name}</a><div class="sub">{job.id}{job.project ? ` · ${job.project}` : ''}</div></td>
      <td>{job.team}</td>
      <td><span class={`state ${job.state.toLowerCase()}`}>{state}</span></td>
      <td class="num">{g === null ? (job.mig_profile || '—') : fmtGpus(g * 1000)}{job.mig_profile && g !== null ? ` (${job.mig_profile})` : ''}</td>
      <td>{ago(job.submitted_at)}</td>
      {info ? (
        <>
          <td data-testid="queue-position" class="num nowrap">
            {info.pos && info.pos.pool !== null
              ? <>{info.pos.team !== null && <span>team {info.pos.team}</span>}<span class="sub"> · pool {info.pos.pool}</span></>
              : 'next cycle'}
          </td>
          <td data-testid="reason" class="reason">{info.reason || 'Waiting for the next scheduling cycle.'}
            {info.code && <span class="code"> ({info.code})</span>}</td>
          <td>{until(info.estimated)}</td>
        </>
      ) : (
        <>
          <td class="num">—</td>
          <td class="sub">{placementSummary(job)}</td>
          <td>{ago(job.started_at).replace(' ago', '')} running</td>
        </>
      )}
      <td>{canChange(me, job) ? <JobActions me={me} job={job} onChanged={reload} compact only="priority" /> : job.priority_class}</td>
      <td><JobActions me={me} job={job} onChanged={reload} compact only="cancel" /></td>
    </tr>
  );
}

function placementSummary(job) {
  const p = job.placements || [];
  if (!p.length) return '';
  const nodes = [...new Set(p.map(x => x.node))];
  return nodes.length <= 3 ? nodes.join(', ') : `${nodes.slice(0, 3).join(', ')} and ${nodes.length - 3} more`;
}

export function Jobs({ me }) {
  const [showForm, setShowForm] = useState(false);
  const [notice, setNotice] = useState('');
  const [filter, setFilter] = useState('');
  const { data, error, reload } = usePoll(loadJobs, [], 2000);
  const rows = useMemo(() => {
    if (!data) return [];
    const f = filter.trim().toLowerCase();
    const keep = j => !f || `${j.name} ${j.id} ${j.team} ${j.project || ''}`.toLowerCase().includes(f);
    const pend = data.pending.filter(keep).map(j => ({ job: j, info: pendingInfo(j, data.queue) }));
    pend.sort((a, b) => (a.info.pos?.pool ?? 1e12) - (b.info.pos?.pool ?? 1e12) || String(a.job.id).localeCompare(String(b.job.id)));
    return [...pend, ...data.running.filter(keep).map(j => ({ job: j, info: null }))];
  }, [data, filter]);
  const nPending = data ? data.pending.length : 0;
  const nRunning = data ? data.running.length : 0;
  return (
    <section aria-labelledby="jobs-title">
      <div class="page-head">
        <h1 id="jobs-title" tabIndex={-1}>Jobs</h1>
        <button type="button" aria-expanded={showForm} aria-controls="new-job" onClick={() => setShowForm(!showForm)}>New job</button>
      </div>
      {showForm && (
        <div id="new-job">
          <SubmitForm onClose={() => setShowForm(false)}
            onSubmitted={job => { setShowForm(false); setNotice(`Submitted ${job.name || ''} as job ${job.id}.`); reload(); }} />
        </div>
      )}
      <p role="status" class="notice">{notice}</p>
      <div class="toolbar">
        <p>{me.role === 'admin' ? 'All teams' : `Team ${me.team}`}: {nRunning} running, {nPending} pending. Updated every 2 s.</p>
        <label for="job-filter">Filter</label>
        <input id="job-filter" type="search" value={filter} onInput={e => setFilter(e.currentTarget.value)} placeholder="name, id, team, project" />
      </div>
      {error && <p class="error" role="alert">Could not load jobs: {error.message}</p>}
      <div class="table-wrap">
        <table data-testid="jobs" class="jobs">
          <caption class="sr-only">Running and pending jobs; pending jobs in queue order</caption>
          <thead>
            <tr><th scope="col">Job</th><th scope="col">Team</th><th scope="col">State</th><th scope="col">GPUs</th>
              <th scope="col">Age</th><th scope="col">Position</th><th scope="col">Reason / placement</th>
              <th scope="col">Estimated start</th><th scope="col">Priority class</th><th scope="col">Actions</th></tr>
          </thead>
          <tbody>
            {rows.map(r => <JobRow key={r.job.id} job={r.job} info={r.info} me={me} reload={reload} />)}
            {data && rows.length === 0 && <tr><td colSpan={10} class="empty">No running or pending jobs.</td></tr>}
          </tbody>
        </table>
      </div>
    </section>
  );
}
