import { useState } from 'preact/hooks';
import { api, listOf } from '../api.js';
import { usePoll, duration, isTime, sec, reasonText, gpus as fmtGpus, usd, clockTime } from '../util.js';
import { canChange, isActive, positionOf, tasksOf, tasksRunning } from '../jobmodel.js';
import { asked, CancelButton, Estimate, PrioritySelect, resubmit, When } from './jobs.jsx';
import { SubmitForm } from './submit.jsx';
import { announce } from '../announce.jsx';

const MILESTONES = ['submitted', 'eligible', 'started', 'preempted', 'checkpointed', 'resumed', 'finished'];

async function loadJob(id) {
  const p = encodeURIComponent(id);
  const [job, whatif, usage] = await Promise.all([
    api('GET', `/api/v1/jobs/${p}`),
    api('GET', `/api/v1/jobs/${p}/whatif`).catch(() => null),
    api('GET', '/api/v1/usage?group_by=job').catch(() => null),
  ]);
  const cost = listOf(usage, 'rows').filter(r => String(r.job) === String(job.id));
  return { job, events: [], whatif, cost };
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

// The job's submitted body asking for about `fraction` of its GPUs, as the server's what-if shrinks it
// (fewer gang members when it has several, else fewer GPUs per worker).
export function shrunkSpec(spec, fraction) {
  const out = { ...spec };
  const n = spec.workers ?? spec.replicas;
  if (n > 1) out[spec.workers !== undefined ? 'workers' : 'replicas'] = Math.max(1, Math.round(n * fraction));
  else if (spec.gpus_per_worker > 1) out.gpus_per_worker = Math.max(1, Math.round(spec.gpus_per_worker * fraction));
  else return null;
  return out;
}

// The job's submitted body as a what-if option changes it: fewer GPUs, or (change any_gpu_kind) no GPU kinds
// named; null when the option asks for nothing different.
export function optionSpec(spec, o) {
  if (!spec) return null;
  if (o.change === 'any_gpu_kind') {
    if (!spec.gpu_kinds) return null;
    const { gpu_kinds, ...rest } = spec;
    return rest;
  }
  if (o.change === 'mig_profile') return o.mig_profile && o.mig_profile !== spec.mig_profile ? { ...spec, mig_profile: o.mig_profile } : null;
  if (o.change === 'spot') return spec.checkpointable ? null : { ...spec, checkpointable: true };
  return o.fraction < 1 ? shrunkSpec(spec, o.fraction) : null;
}

function optionLabel(o) {
  if (o.change === 'any_gpu_kind') return 'any GPU kind';
  if (o.change === 'mig_profile') return `MIG profile ${o.mig_profile}`;
  if (o.change === 'spot') return 'checkpointable, on spot too';
  return o.fraction === 1 ? 'as asked' : o.fraction === 0.5 ? 'half' : o.fraction === 0.25 ? 'a quarter' : `${o.fraction}×`;
}

function optionWhat(o) {
  if (o.change === 'any_gpu_kind') return `${o.gpus} GPUs of any kind`;
  if (o.change === 'mig_profile') return `a ${o.mig_profile} MIG slice`;
  if (o.change === 'spot') return `${o.gpus} GPUs as a checkpointable job (spot allowed)`;
  return `${o.gpus} GPUs`;
}

// Applies a what-if option: submits the job again as the option asks, then cancels this one (a pending job's
// size and kinds cannot change in place).
async function applyOption(job, o) {
  const spec = optionSpec(job.spec, o);
  if (!spec) return;
  try {
    const made = await api('POST', '/api/v1/jobs', spec);
    await api('POST', `/api/v1/jobs/${encodeURIComponent(job.id)}:cancel`);
    announce(`Submitted ${job.name} with ${optionWhat(o)} as job ${made.id} and cancelled job ${job.id}.`,
      { href: `#/jobs/${encodeURIComponent(made.id)}`, linkText: `Open job ${made.id}` });
  } catch (e) { announce(`Could not apply the what-if to ${job.name} (job ${job.id}): ${e.message}`, { error: true }); }
}

function WhatIf({ job, whatif, canApply }) {
  const [confirm, setConfirm] = useState(null);
  if (job.state !== 'Pending') return <p>Only a pending job has a what-if.</p>;
  const opts = listOf(whatif, 'options');
  if (!whatif) return <p>The server gives no what-if for this job.</p>;
  return (
    <table class="compact">
      <caption class="sr-only">Earliest start with fewer GPUs, any GPU kind, another MIG profile or spot capacity</caption>
      <thead><tr><th scope="col">If it asked for</th><th scope="col">GPUs</th><th scope="col">Earliest start</th><th scope="col">Why</th><th scope="col">Apply</th></tr></thead>
      <tbody>
        {opts.map(o => {
          const key = o.change ? `${o.change}:${o.mig_profile ?? ''}` : o.fraction;
          return (
          <tr key={key}>
            <td>{optionLabel(o)}</td>
            <td class="num">{o.gpus ?? '—'}</td>
            <td>{o.estimated_start ? <When t={o.estimated_start} /> : 'no estimate'}</td>
            <td>{reasonText(o.reason)}</td>
            <td>{canApply && optionSpec(job.spec, o) && (confirm === key
              ? <span class="row-actions"><button type="button" class="small" onClick={() => { setConfirm(null); applyOption(job, o); }}>Confirm: resubmit with {optionWhat(o)}, cancel this job</button>
                  <button type="button" class="secondary small" onClick={() => setConfirm(null)}>Keep as is</button></span>
              : <button type="button" class="secondary small" aria-label={`Apply: ask for ${optionWhat(o)}`} onClick={() => setConfirm(key)}>Apply</button>)}</td>
          </tr>);
        })}
      </tbody>
    </table>
  );
}

// What it asked for beside what it got and what it has cost.
function AskedVsPlaced({ job, cost }) {
  const spec = job.spec || {};
  const placed = (job.placements || []).flatMap(n => (n.gpus || []).map(g => g.mig_profile ? `${g.mig_profile} on ${n.node}` : `${fmtGpus(g.milli)} GPU on ${n.node}`));
  const money = cost.reduce((a, r) => a + (typeof r.cost === 'number' ? r.cost : 0), 0);
  return (
    <dl class="facts">
      <dt>Asked for</dt><dd>{asked(job)}{spec.memory_gib ? `, ${spec.memory_gib} GiB per GPU` : ''}; class {job.class}; priority {job.priority_class}{spec.tier ? `; tier ${spec.tier}` : ''}</dd>
      <dt>Placed on</dt><dd>{placed.length ? [...new Set(placed)].join('; ') : 'not placed'}</dd>
      {job.placement_note && <><dt>Why it differs</dt><dd data-testid="placement-note">{job.placement_note}</dd></>}
      <dt>GPU-hours so far</dt><dd>{(job.gpu_hours ?? 0).toFixed(2)} GPU-h</dd>
      <dt>Cost so far</dt><dd>{cost.length ? `${usd(money)} (USD)` : '—'}</dd>
    </dl>
  );
}

function JobHead({ job, me, reload, onEdit }) {
  const mine = canChange(me, job);
  return (
    <div class="page-head">
      <h1 id="job-title" tabIndex={-1}>{job.name} <span class="sub">job {job.id}</span></h1>
      <div class="row-actions">
        {mine && isActive(job) && <><PrioritySelect job={job} onChanged={reload} /><CancelButton job={job} onChanged={reload} /></>}
        {!isActive(job) && me.role !== 'viewer' && <>
          <button type="button" class="secondary" onClick={() => resubmit(job)}>Resubmit</button>
          <button type="button" class="secondary" onClick={onEdit}>Resubmit with changes</button>
        </>}
      </div>
    </div>
  );
}

export function JobPage({ id, me }) {
  const { data, error, reload } = usePoll(() => loadJob(id), [id], 3000);
  const [editing, setEditing] = useState(false);
  if (error && !data) return <section><h1 tabIndex={-1}>Job {id}</h1><p class="error" role="alert">{error.status === 404 ? 'No such job (or not one of your team\'s).' : error.message}</p><a href="#/jobs">Back to jobs</a></section>;
  if (!data) return <p role="status">Loading…</p>;
  const { job, events, whatif, cost } = data;
  const tl = timeline(job, events);
  const pos = positionOf(job);
  const n = tasksOf(job);
  const e = job.estimate;
  return (
    <section aria-labelledby="job-title" data-job={job.id}>
      <p><a href="#/jobs">← Jobs</a></p>
      <JobHead job={job} me={me} reload={reload} onEdit={() => setEditing(true)} />
      {editing && <SubmitForm template={job} onClose={() => setEditing(false)} onSubmitted={made => { setEditing(false); announce(`Submitted ${made.name} as job ${made.id}.`, { href: `#/jobs/${encodeURIComponent(made.id)}`, linkText: `Open job ${made.id}` }); }} />}
      <dl class="facts">
        <dt>State</dt><dd>{job.state}{job.state === 'Running' && n > 1 ? ` (${tasksRunning(job)}/${n} tasks)` : ''}</dd>
        <dt>Team / project / user</dt><dd>{job.team} / {job.project || '—'} / {job.user || '—'}</dd>
        <dt>Submitted</dt><dd><When t={job.submitted_at} /></dd>
        {job.started_at && <><dt>Started</dt><dd><When t={job.started_at} /></dd></>}
        {job.finished_at && <><dt>Ended</dt><dd><When t={job.finished_at} /></dd></>}
        {job.state === 'Pending' && <>
          <dt>Position</dt><dd>{pos && pos.pool !== null ? `${pos.team !== null ? `team ${pos.team}, ` : ''}pool ${pos.pool}` : 'next cycle'}</dd>
          <dt>Why it waits</dt><dd data-testid="reason">{reasonText(job.reason) || 'Waiting for the next scheduling cycle.'}</dd>
          {job.reason && job.reason.reservation && <><dt>Reserved for</dt><dd data-testid="reservation">
            <a href={`#/jobs/${encodeURIComponent(job.reason.reservation.job)}`}>job {job.reason.reservation.job} ({job.reason.reservation.name})</a>
            {job.reason.reservation.starts_at && <> from <When t={job.reason.reservation.starts_at} /></>}</dd></>}
          <dt>Estimated start</dt><dd><Estimate job={job} />{e && e.likely && <span class="sub"> (range {clockTime(e.earliest)} – {clockTime(e.latest)})</span>}</dd>
          {e && e.changed_because && <><dt>Estimate changed</dt><dd data-testid="estimate-change">{e.changed_because}</dd></>}
        </>}
        {job.message && <><dt>Message</dt><dd>{job.message}</dd></>}
      </dl>
      <h2>Asked for and placed</h2>
      <AskedVsPlaced job={job} cost={cost} />
      <h2>Timeline</h2>
      <ol class="timeline">
        {tl.map((m, i) => (
          <li key={i} class={m.kind}><strong>{m.kind}</strong> <span>{duration(m.at - (tl[0] ? tl[0].at : m.at))} after submission</span>{m.detail && <span class="sub"> — {m.detail}</span>}</li>
        ))}
      </ol>
      <Waits job={job} tl={tl} />
      <h2>Placement</h2>
      <Placement job={job} />
      <h2>What would start it sooner?</h2>
      <WhatIf job={job} whatif={whatif} canApply={canChange(me, job)} />
    </section>
  );
}
