import { memo } from 'preact/compat';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
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

// The priority class of a job the caller may change. In the table (`compact`) it is a button that turns
// into a select when used, so that a page of 1,000 jobs does not build 1,000 selects.
function PriorityControl({ job, act, compact }) {
  const [open, setOpen] = useState(!compact);
  const select = useRef(null);
  useEffect(() => { if (open && compact && select.current) select.current.focus(); }, [open]);
  const classes = PRIORITY_CLASSES.includes(job.priority_class) ? PRIORITY_CLASSES : [job.priority_class, ...PRIORITY_CLASSES];
  const id = `prio-${job.id}`;
  if (!open) {
    return (
      <button type="button" class="secondary small" aria-label={`Change priority class of ${job.name} (now ${job.priority_class})`}
        onClick={() => setOpen(true)}>{job.priority_class} ▾</button>
    );
  }
  return (
    <>
      <label class={compact ? 'sr-only' : ''} for={id}>Priority class{compact ? ` of ${job.name}` : ''}</label>
      <select id={id} ref={select} value={job.priority_class}
        onKeyDown={e => { if (compact && e.key === 'Escape') setOpen(false); }}
        onChange={async e => { await act('PATCH', `/api/v1/jobs/${encodeURIComponent(job.id)}`, { priority_class: e.currentTarget.value }); if (compact) setOpen(false); }}>
        {classes.map(c => <option key={c} value={c}>{c}</option>)}
      </select>
    </>
  );
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
  const prio = <PriorityControl job={job} act={act} compact={compact} />;
  const err = error && <span class="error" role="alert">{error}</span>;
  if (only === 'priority') return <div class="row-actions">{prio}{err}</div>;
  return (
    <div class="row-actions">
      {only !== 'cancel' && prio}
      {confirm
        ? <button type="button" class="danger" aria-label={`Confirm cancel of ${job.name}`}
            onClick={() => { setConfirm(false); act('POST', `/api/v1/jobs/${id}:cancel`); }}>Confirm cancel</button>
        : <button type="button" class="secondary" aria-label={`Cancel ${job.name}`} onClick={() => setConfirm(true)}>Cancel</button>}
      {err}
    </div>
  );
}

// The text a row shows; a row re-renders only when this changes (polls bring fresh objects every 2 s).
function rowView(job, info) {
  const n = tasksOf(job);
  const g = gpuCount(job);
  return {
    state: job.state === 'Running' && n > 1 ? `Running ${tasksRunning(job)}/${n}` : job.state,
    gpus: g === null ? (job.mig_profile || '—') : `${fmtGpus(g * 1000)}${job.mig_profile ? ` (${job.mig_profile})` : ''}`,
    age: ago(job.submitted_at),
    pending: !!info,
    team_pos: info && info.pos ? info.pos.team : null,
    pool_pos: info && info.pos ? info.pos.pool : null,
    reason: info ? info.reason || 'Waiting for the next scheduling cycle.' : placementSummary(job),
    code: info ? info.code : '',
    when: info ? until(info.estimated) : `${ago(job.started_at).replace(' ago', '')} running`,
    key: `${job.id}|${job.name}|${job.project}|${job.team}|${job.user}|${job.state}|${job.priority_class}`,
  };
}

function JobRowInner({ job, v, me, reload }) {
  return (
    <tr data-job-id={job.id} class={`st-${job.state.toLowerCase()}`}>
      <td><a href={`#/jobs/${encodeURIComponent(job.id)}`}>{job.name}</a><div class="sub">{job.id}{job.project ? ` · ${job.project}` : ''}</div></td>
      <td>{job.team}</td>
      <td><span class={`state ${job.state.toLowerCase()}`}>{v.state}</span></td>
      <td class="num">{v.gpus}</td>
      <td>{v.age}</td>
      {v.pending ? (
        <>
          <td data-testid="queue-position" class="num nowrap">
            {v.pool_pos !== null
              ? <>{v.team_pos !== null && <span>team {v.team_pos}</span>}<span class="sub"> · pool {v.pool_pos}</span></>
              : 'next cycle'}
          </td>
          <td data-testid="reason" class="reason">{v.reason}{v.code && <span class="code"> ({v.code})</span>}</td>
        </>
      ) : (
        <>
          <td class="num">—</td>
          <td class="sub">{v.reason}</td>
        </>
      )}
      <td>{v.when}</td>
      <td>{canChange(me, job) ? <JobActions me={me} job={job} onChanged={reload} compact only="priority" /> : job.priority_class}</td>
      <td><JobActions me={me} job={job} onChanged={reload} compact only="cancel" /></td>
    </tr>
  );
}

const sameView = (a, b) => a.me === b.me && a.reload === b.reload &&
  Object.keys(a.v).every(k => a.v[k] === b.v[k]);
const JobRow = memo(JobRowInner, sameView);

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
          <colgroup>
            <col style={{ width: '14%' }} /><col style={{ width: '7%' }} /><col style={{ width: '8%' }} /><col style={{ width: '5%' }} />
            <col style={{ width: '8%' }} /><col style={{ width: '9%' }} /><col style={{ width: '21%' }} /><col style={{ width: '8%' }} />
            <col style={{ width: '11%' }} /><col style={{ width: '9%' }} />
          </colgroup>
          <thead>
            <tr><th scope="col">Job</th><th scope="col">Team</th><th scope="col">State</th><th scope="col">GPUs</th>
              <th scope="col">Age</th><th scope="col">Position</th><th scope="col">Reason / placement</th>
              <th scope="col">Estimated start</th><th scope="col">Priority class</th><th scope="col">Actions</th></tr>
          </thead>
          <tbody>
            {rows.map(r => <JobRow key={r.job.id} job={r.job} v={rowView(r.job, r.info)} me={me} reload={reload} />)}
            {data && rows.length === 0 && <tr><td colSpan={10} class="empty">No running or pending jobs.</td></tr>}
          </tbody>
        </table>
      </div>
    </section>
  );
}
