import { memo } from 'preact/compat';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, NOT_MODIFIED } from '../api.js';
import { announce } from '../announce.jsx';
import { clockTime, relative, gpuText, reasonText, isTime, keepEqual } from '../util.js';
import { canChange, isActive, positionOf, tasksOf, tasksRunning, PRIORITY_CLASSES } from '../jobmodel.js';
import { SubmitForm } from './submit.jsx';

// The state filter: label, the API's `state` value.
export const STATES = [['Active', 'active'], ['Pending', 'Pending'], ['Running', 'Running'], ['Finished', 'Succeeded'],
  ['Failed', 'Failed'], ['Cancelled', 'Cancelled'], ['All', 'all']];
const SORTS = [['submitted', 'Submitted (newest first)'], ['started', 'Started (newest first)'], ['ended', 'Ended (newest first)']];
const PAGE_SIZE = 25;

// A time as <time datetime> with the relative part in brackets.
export function When({ t }) {
  if (!isTime(t)) return <span>—</span>;
  return <><time datetime={t}>{clockTime(t)}</time> <span class="sub">({relative(t)})</span></>;
}

// The estimate cell of a pending job: its likely start, or why it cannot start.
export function Estimate({ job }) {
  const e = job.estimate;
  if (e && e.likely) {
    return (
      <span data-testid="estimated-start" title={`earliest ${clockTime(e.earliest)}, latest ${clockTime(e.latest)}`}>
        <When t={e.likely} />
      </span>
    );
  }
  const r = job.reason || {};
  const why = r.code === 'ExceedsQueueLimit' || r.code === 'TeamQuotaExhausted' || r.code === 'BorrowLimit'
    ? `cannot start under the current limits: ${reasonText(r)}` : (job.reason ? 'no estimate yet' : 'after the next cycle');
  return <span data-testid="estimated-start">{why}</span>;
}

// Resubmits a job as it was submitted (its `spec`), announcing the new job.
export async function resubmit(job) {
  try {
    const full = job.spec ? job : await api('GET', `/api/v1/jobs/${encodeURIComponent(job.id)}`);
    const made = await api('POST', '/api/v1/jobs', full.spec);
    announce(`Resubmitted ${job.name} as job ${made.id}.`, { href: `#/jobs/${encodeURIComponent(made.id)}`, linkText: `Open job ${made.id}` });
    return made;
  } catch (e) {
    announce(`Could not resubmit ${job.name} (job ${job.id}): ${e.message}`, { error: true });
    return null;
  }
}

export function PrioritySelect({ job, onChanged }) {
  const id = `prio-${job.id}`;
  const classes = PRIORITY_CLASSES.includes(job.priority_class) ? PRIORITY_CLASSES : [job.priority_class, ...PRIORITY_CLASSES];
  const change = async e => {
    const to = e.currentTarget.value;
    try {
      await api('PATCH', `/api/v1/jobs/${encodeURIComponent(job.id)}`, { priority_class: to });
      announce(`Priority of ${job.name} (job ${job.id}) changed from ${job.priority_class} to ${to}.`);
      onChanged && onChanged();
    } catch (x) { announce(`Could not change the priority of ${job.name} (job ${job.id}): ${x.message}`, { error: true }); }
  };
  return (
    <>
      <label class="sr-only" for={id}>Priority for {job.name}</label>
      <select id={id} value={job.priority_class} onChange={change}>
        {classes.map(c => <option key={c} value={c}>{c}</option>)}
      </select>
    </>
  );
}

export function CancelButton({ job, onChanged }) {
  const [confirm, setConfirm] = useState(false);
  const go = async () => {
    setConfirm(false);
    try {
      await api('POST', `/api/v1/jobs/${encodeURIComponent(job.id)}:cancel`);
      announce(`Cancelled ${job.name} (job ${job.id}).`);
      onChanged && onChanged();
    } catch (x) { announce(`Could not cancel ${job.name} (job ${job.id}): ${x.message}`, { error: true }); }
  };
  if (!confirm) return <button type="button" class="secondary small" aria-label={`Cancel ${job.name}`} onClick={() => setConfirm(true)}>Cancel</button>;
  return (
    <span class="row-actions">
      <button type="button" class="danger small" aria-label={`Confirm cancel of ${job.name}`} onClick={go}>Confirm cancel</button>
      <button type="button" class="secondary small" aria-label={`Keep ${job.name}`} onClick={() => setConfirm(false)}>Keep</button>
    </span>
  );
}

// Where it runs or why it waits, in a few words.
function whereOrWhy(job) {
  if (job.state === 'Pending') return reasonText(job.reason) || 'Waiting for the next scheduling cycle.';
  const nodes = [...new Set((job.placements || []).map(x => x.node))];
  const where = nodes.length <= 2 ? nodes.join(', ') : `${nodes.slice(0, 2).join(', ')} and ${nodes.length - 2} more`;
  if (job.state === 'Running') return where ? `on ${where}` : 'starting';
  return [where && `ran on ${where}`, job.message].filter(Boolean).join('; ');
}

export function asked(job) {
  if (job.mig_profile) return `${job.tasks || 1} × ${job.mig_profile}`;
  return gpuText(job.gpus);
}

function JobRowInner({ job, me, reload, onEdit }) {
  const mine = canChange(me, job);
  const active = isActive(job);
  const pos = job.state === 'Pending' ? positionOf(job) : null;
  const n = tasksOf(job);
  return (
    <tr data-job-id={job.id} class={`st-${job.state.toLowerCase()}`}>
      <td data-label="Job"><a href={`#/jobs/${encodeURIComponent(job.id)}`}>{job.name}</a>
        <div class="sub">job {job.id}{job.project ? ` · ${job.project}` : ''}{job.user ? ` · ${job.user}` : ''}</div></td>
      <td data-label="Team">{job.team}</td>
      <td data-label="State"><span class={`state ${job.state.toLowerCase()}`}>{job.state === 'Running' && n > 1 ? `Running ${tasksRunning(job)}/${n}` : job.state}</span></td>
      <td data-label="Asked" class="num">{asked(job)}</td>
      <td data-label="Submitted"><When t={job.submitted_at} /></td>
      {job.state === 'Pending' ? <>
        <td data-label="Position" data-testid="queue-position">{pos && pos.pool !== null ? <>team {pos.team} · pool {pos.pool}</> : 'next cycle'}</td>
        <td data-label="Why it waits" data-testid="reason" class="reason">{whereOrWhy(job)}</td>
        <td data-label="Estimated start"><Estimate job={job} /></td>
      </> : <>
        <td data-label="Position">—</td>
        <td data-label="Where" class="reason">{whereOrWhy(job)}</td>
        <td data-label={job.finished_at ? 'Ended' : 'Started'}>{job.finished_at ? <When t={job.finished_at} /> : <When t={job.started_at} />}</td>
      </>}
      <td data-label="GPU-hours" class="num nowrap">{(job.gpu_hours ?? 0).toFixed(2)} GPU-h</td>
      <td data-label="Priority">{mine && active ? <PrioritySelect job={job} onChanged={reload} /> : job.priority_class}</td>
      <td data-label="Actions"><div class="row-actions">
        {mine && active && <CancelButton job={job} onChanged={reload} />}
        {!active && me.role !== 'viewer' && <>
          <button type="button" class="secondary small" aria-label={`Resubmit ${job.name}`} onClick={async () => { if (await resubmit(job)) reload(); }}>Resubmit</button>
          <button type="button" class="secondary small" aria-label={`Resubmit ${job.name} with changes`} onClick={() => onEdit(job)}>Resubmit with changes</button>
        </>}
      </div></td>
    </tr>
  );
}
const JobRow = memo(JobRowInner, (a, b) => a.job === b.job && a.me === b.me);

// Polls one page of the list; a poll sends `since` and gets 304 (nothing) while the page is unchanged. A changed page
// keeps the job objects it shares with the previous one (keepEqual), so that only the rows of changed jobs redraw.
function useJobsPage(query, cursor) {
  const [state, setState] = useState({ page: null, error: null, updated: null });
  const version = useRef('');
  const gen = useRef(0);
  const load = async () => {
    const g = gen.current;
    const q = new URLSearchParams({ state: query.state, sort: query.sort, page_size: String(PAGE_SIZE) });
    if (query.search) q.set('search', query.search);
    if (cursor) q.set('page_token', cursor);
    if (version.current) q.set('since', version.current);
    try {
      const r = await api('GET', `/api/v1/jobs?${q}`);
      if (g !== gen.current) return;
      if (r === NOT_MODIFIED) setState(s => ({ ...s, error: null, updated: new Date() }));
      else { version.current = r.version || ''; setState(s => ({ page: keepEqual(s.page, r), error: null, updated: new Date() })); }
    } catch (error) {
      if (g === gen.current) setState(s => ({ ...s, error }));
    }
  };
  useEffect(() => {
    gen.current++;
    version.current = '';
    setState(s => ({ ...s, page: null }));
    load();
    const id = setInterval(() => { if (!document.hidden) load(); }, 2000);
    const clock = setInterval(() => { if (!document.hidden) api('GET', '/api/v1/session').catch(() => {}); }, 30000);
    return () => { clearInterval(id); clearInterval(clock); gen.current++; };
  }, [query.state, query.sort, query.search, cursor]);
  return { ...state, reload: () => { version.current = ''; load(); } };
}

function Toolbar({ query, setQuery, total }) {
  const [text, setText] = useState(query.search);
  return (
    <div class="toolbar">
      <div class="field-inline">
        <label for="job-state">State</label>
        <select id="job-state" value={query.state} onChange={e => setQuery({ ...query, state: e.currentTarget.value })}>
          {STATES.map(([label, v]) => <option key={v} value={v}>{label}</option>)}
        </select>
      </div>
      <div class="field-inline">
        <label for="job-sort">Sort by</label>
        <select id="job-sort" value={query.sort} onChange={e => setQuery({ ...query, sort: e.currentTarget.value })}>
          {SORTS.map(([v, label]) => <option key={v} value={v}>{label}</option>)}
        </select>
      </div>
      <form role="search" class="field-inline" onSubmit={e => { e.preventDefault(); setQuery({ ...query, search: text.trim() }); }}>
        <label for="job-search">Search</label>
        <input id="job-search" type="search" value={text} placeholder="name, project or user" onInput={e => setText(e.currentTarget.value)} />
        <button type="submit" class="secondary">Search</button>
      </form>
      <span class="sub">{total === null ? '' : `${total} job${total === 1 ? '' : 's'}`}</span>
    </div>
  );
}

export function Jobs({ me }) {
  const [showForm, setShowForm] = useState(false);
  const [template, setTemplate] = useState(null);
  const [query, setQueryState] = useState({ state: 'active', sort: 'submitted', search: '' });
  const [cursors, setCursors] = useState(['']); // page tokens of the pages seen; the last is shown
  const setQuery = q => { setQueryState(q); setCursors(['']); };
  const { page, error, updated, reload } = useJobsPage(query, cursors[cursors.length - 1]);
  const jobs = page ? page.jobs : [];
  const edit = job => { setTemplate(job); setShowForm(true); };
  return (
    <section aria-labelledby="jobs-title">
      <div class="page-head">
        <h1 id="jobs-title" tabIndex={-1}>Jobs</h1>
        {me.role !== 'viewer' && <button type="button" aria-expanded={showForm} aria-controls="new-job" onClick={() => { setTemplate(null); setShowForm(!showForm); }}>New job</button>}
      </div>
      {showForm && (
        <div id="new-job">
          <SubmitForm key={template ? template.id : 'new'} template={template} onClose={() => setShowForm(false)}
            onSubmitted={job => { setShowForm(false); announce(`Submitted ${job.name || 'the job'} as job ${job.id}.`, { href: `#/jobs/${encodeURIComponent(job.id)}`, linkText: `Open job ${job.id}` }); reload(); }} />
        </div>
      )}
      <Toolbar query={query} setQuery={setQuery} total={page ? page.total : null} />
      <p class="sub" aria-live="off">{me.role === 'admin' ? 'All teams' : `Team ${me.team}`}. {updated ? `Updated ${updated.toLocaleTimeString('en-GB')}` : 'Loading…'}; refreshed every 2 s.</p>
      {error && <p class="error offline" role="alert">Offline: the server does not answer ({error.message}). Showing what it last sent.</p>}
      <div class="table-wrap">
        <table data-testid="jobs" class="jobs">
          <caption class="sr-only">Jobs ({STATES.find(s => s[1] === query.state)[0]}), newest first</caption>
          <colgroup>
            {[10, 6, 8, 6, 9, 7, 17, 9, 7, 9, 12].map((w, i) => <col key={i} style={{ width: `${w}%` }} />)}
          </colgroup>
          <thead>
            <tr><th scope="col">Job</th><th scope="col">Team</th><th scope="col">State</th><th scope="col" class="num">Asked</th>
              <th scope="col">Submitted</th><th scope="col">Position</th><th scope="col">Why it waits / where</th>
              <th scope="col">Estimated start / ran</th><th scope="col" class="num">GPU-hours</th><th scope="col">Priority</th><th scope="col">Actions</th></tr>
          </thead>
          <tbody>
            {jobs.map(j => <JobRow key={j.id} job={j} me={me} reload={reload} onEdit={edit} />)}
            {page && jobs.length === 0 && <tr><td colSpan={11} class="empty">No jobs match.</td></tr>}
          </tbody>
        </table>
      </div>
      <div class="pager">
        {cursors.length > 1 && <button type="button" class="secondary" onClick={() => setCursors(cursors.slice(0, -1))}>Previous page</button>}
        {page && page.next_page_token && <button type="button" class="secondary" onClick={() => setCursors([...cursors, page.next_page_token])}>Next page</button>}
        <span class="sub">Page {cursors.length}</span>
      </div>
    </section>
  );
}
