import { api, listOf } from '../api.js';
import { usePoll, duration, isTime, sec, until, reasonText, gpus as fmtGpus } from '../util.js';
import { positionOf, tasksOf, tasksRunning } from '../jobmodel.js';
import { JobActions } from './jobs.jsx';

const MILESTONES = ['submitted', 'eligible', 'started', 'preempted', 'checkpointed', 'resumed', 'finished'];

async function loadJob(id) {
  const p = encodeURIComponent(id);
  const [job, events, whatif] = await Promise.all([
    api('GET', `/api/v1/jobs/${p}`),
    api('GET', `/api/v1/jobs/${p}/events`).catch(() => null),
    api('GET', `/api/v1/jobs/${p}/whatif`).catch(() => null),
  ]);
  return { job, events: listOf(events, 'events'), hasEvents: events !== null, whatif };
}

// Milestones from the job's own times and its events (`type` or `kind` naming the milestone).
export function timeline(job, events) {
  const out = [];
  const add = (kind, at, detail) => { if (isTime(at)) out.push({ kind, at: sec(at), detail: detail || '' }); };
  add('submitted', job.submitted_at);
  add('eligible', job.eligible_at);
  for (const e of events) {
    const kind = String(e.type || e.kind || e.event || '').toLowerCase();
    const at = e.at ?? e.time ?? e.t;
    if (!MILESTONES.includes(kind)) continue;
    if (['submitted', 'eligible'].includes(kind) && out.some(x => x.kind === kind)) continue;
    if (kind === 'started' && isTime(job.started_at) && out.some(x => x.kind === 'started')) continue;
    add(kind, at, e.message);
  }
  if (!out.some(x => x.kind === 'started')) add('started', job.started_at);
  if (!out.some(x => x.kind === 'finished')) add('finished', job.finished_at, job.state);
  out.sort((a, b) => a.at - b.at || MILESTONES.indexOf(a.kind) - MILESTONES.indexOf(b.kind));
  return out;
}

function Waits({ job, tl }) {
  const sub = sec(job.submitted_at);
  const elig = (tl.find(x => x.kind === 'eligible') || {}).at ?? sub;
  const start = (tl.find(x => x.kind === 'started') || {}).at;
  return (
    <dl class="facts">
      <dt>Submit to eligible</dt><dd>{isTime(sub) && isTime(elig) ? duration(elig - sub) : '—'}</dd>
      <dt>Eligible to start</dt><dd>{isTime(start) ? duration(start - elig) : 'not started yet'}</dd>
    </dl>
  );
}

function Placement({ job }) {
  const p = job.placements || [];
  if (!p.length) return <p>Not placed.</p>;
  return (
    <table class="compact">
      <caption class="sr-only">Placement</caption>
      <thead><tr><th scope="col">Node</th><th scope="col">GPU</th><th scope="col">Share</th><th scope="col">MIG instance</th></tr></thead>
      <tbody>
        {p.flatMap((n, i) => (n.gpus || []).map((g, k) => (
          <tr key={`${i}-${k}`}>
            <td>{n.node}</td><td>{g.index}</td><td>{g.milli === 1000 || g.milli === undefined ? 'whole' : `${fmtGpus(g.milli)} GPU`}</td>
            <td>{g.mig_profile ? `${g.mig_profile} at slice ${g.mig_start}` : '—'}</td>
          </tr>
        )))}
      </tbody>
    </table>
  );
}

function WhatIf({ job, whatif }) {
  if (job.state !== 'Pending') return <p>Only a pending job has a what-if.</p>;
  const opts = listOf(whatif, 'options');
  if (!whatif) return <p>The server gives no what-if for this job.</p>;
  return (
    <table class="compact">
      <caption class="sr-only">Earliest start with fewer GPUs</caption>
      <thead><tr><th scope="col">If it asked for</th><th scope="col">GPUs</th><th scope="col">Earliest start</th><th scope="col">Why</th></tr></thead>
      <tbody>
        {opts.map(o => (
          <tr key={o.fraction}>
            <td>{o.fraction === 1 ? 'as asked' : o.fraction === 0.5 ? 'half' : o.fraction === 0.25 ? 'a quarter' : `${o.fraction}×`}</td>
            <td class="num">{o.gpus ?? '—'}</td>
            <td>{o.fits === false ? 'never fits' : until(o.estimated_start)}</td>
            <td>{reasonText(o.reason)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function JobPage({ id, me }) {
  const { data, error, reload } = usePoll(() => loadJob(id), [id], 3000);
  if (error && !data) return <section><h1 tabIndex={-1}>Job {id}</h1><p class="error" role="alert">{error.status === 404 ? 'No such job (or not one of your team\'s).' : error.message}</p><a href="#/jobs">Back to jobs</a></section>;
  if (!data) return <p role="status">Loading…</p>;
  const { job, events, hasEvents, whatif } = data;
  const tl = timeline(job, events);
  const pos = positionOf(job);
  const n = tasksOf(job);
  return (
    <section aria-labelledby="job-title" data-job={job.id}>
      <p><a href="#/jobs">← Jobs</a></p>
      <div class="page-head">
        <h1 id="job-title" tabIndex={-1}>{job.name} <span class="sub">job {job.id}</span></h1>
        <JobActions me={me} job={job} onChanged={reload} />
      </div>
      <dl class="facts">
        <dt>State</dt><dd>{job.state}{job.state === 'Running' && n > 1 ? ` (${tasksRunning(job)}/${n} tasks)` : ''}</dd>
        <dt>Team / project</dt><dd>{job.team} / {job.project || '—'}</dd>
        <dt>Class</dt><dd>{job.class}</dd>
        <dt>Priority class</dt><dd>{job.priority_class}</dd>
        {job.state === 'Pending' && <>
          <dt>Position</dt><dd>{pos && pos.pool !== null ? `${pos.team !== null ? `team ${pos.team}, ` : ''}pool ${pos.pool}` : 'next cycle'}</dd>
          <dt>Why it waits</dt><dd data-testid="reason">{reasonText(job.reason) || 'Waiting for the next scheduling cycle.'}</dd>
          <dt>Estimated start</dt><dd>{until(job.estimated_start)}</dd>
        </>}
        {job.message && <><dt>Message</dt><dd>{job.message}</dd></>}
      </dl>
      <h2>Timeline</h2>
      <ol class="timeline">
        {tl.map((m, i) => (
          <li key={i} class={m.kind}><strong>{m.kind}</strong> <span>{duration(m.at - (tl[0] ? tl[0].at : m.at))} after submission</span>{m.detail && <span class="sub"> — {m.detail}</span>}</li>
        ))}
      </ol>
      <Waits job={job} tl={tl} />
      <h2>Placement</h2>
      <Placement job={job} />
      <h2>What if it asked for fewer GPUs?</h2>
      <WhatIf job={job} whatif={whatif} />
      {hasEvents && <h2>Events</h2>}
      {!hasEvents ? null : events.length ? (
        <ol class="events">
          {events.map((e, i) => <li key={i}><span class="sub">{isTime(e.at) ? new Date(sec(e.at) * 1000).toISOString().replace('.000Z', 'Z') : ''}</span> <strong>{e.type || e.kind}</strong> {e.message || ''}</li>)}
        </ol>
      ) : <p>No events recorded.</p>}
    </section>
  );
}
