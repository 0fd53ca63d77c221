import { api, listOf } from '../api.js';
import { usePoll, gpuField, fmtNumber, teamColour } from '../util.js';

function teamNumbers(t) {
  const guaranteed = gpuField(t, 'guaranteed') ?? 0;
  const limitRaw = gpuField(t, 'limit');
  const limit = limitRaw === null || limitRaw < 0 ? null : limitRaw;
  const allocated = gpuField(t, 'allocated') ?? 0;
  const fair = gpuField(t, 'fair_share');
  const borrowed = gpuField(t, 'borrowed') ?? Math.max(0, allocated - guaranteed);
  return { guaranteed, limit, allocated, fair, borrowed };
}

// One horizontal bar: allocated within guarantee, borrowed beyond it, markers for guarantee, fair share, limit.
function QuotaBar({ label, n, scale }) {
  const pct = x => `${Math.min(100, (100 * x) / scale)}%`;
  const within = Math.min(n.allocated, n.guaranteed);
  return (
    <div class="quota">
      <div class="quota-label">{label}</div>
      <div class="bar" role="img"
        aria-label={`${label}: ${fmtNumber(n.allocated, 1)} GPUs allocated, ${fmtNumber(n.guaranteed, 0)} guaranteed, ` +
          `${n.limit === null ? 'no limit' : `limit ${fmtNumber(n.limit, 0)}`}, ${fmtNumber(n.borrowed, 1)} borrowed`}>
        <span class="seg alloc" style={{ width: pct(within) }} />
        <span class="seg borrowed" style={{ left: pct(within), width: pct(n.borrowed) }} />
        <span class="mark guarantee" style={{ left: pct(n.guaranteed) }} title="guarantee" />
        {n.fair !== null && <span class="mark fair" style={{ left: pct(n.fair) }} title="fair share" />}
        {n.limit !== null && <span class="mark limit" style={{ left: pct(n.limit) }} title="limit" />}
      </div>
      <div class="quota-nums">{fmtNumber(n.allocated, 1)} / {fmtNumber(n.guaranteed, 0)} guaranteed
        {n.limit !== null ? `, limit ${fmtNumber(n.limit, 0)}` : ''}{n.borrowed > 0 ? `, borrowing ${fmtNumber(n.borrowed, 1)}` : ''}</div>
    </div>
  );
}

function byKind(t) {
  const k = t.by_kind || t.gpu_kinds || t.kinds;
  if (!k) return [];
  if (Array.isArray(k)) return k.map(x => [x.kind || x.name, teamNumbers(x)]);
  return Object.entries(k).map(([kind, x]) => [kind, teamNumbers(x)]);
}

export function Team({ me }) {
  const { data, error } = usePoll(async () => listOf(await api('GET', '/api/v1/teams'), 'teams'), [], 3000);
  if (error && !data) return <section><h1 tabIndex={-1}>Team</h1><p class="error" role="alert">{error.message}</p></section>;
  if (!data) return <p role="status">Loading…</p>;
  const teams = data.map(t => ({ t, n: teamNumbers(t) }));
  const scale = Math.max(1, ...teams.flatMap(({ n }) => [n.guaranteed, n.limit ?? 0, n.allocated, n.fair ?? 0]));
  const borrowers = teams.filter(({ n }) => n.borrowed > 0);
  const lenders = teams.filter(({ n }) => n.allocated < n.guaranteed);
  const mine = me.team ? teams.filter(x => x.t.name === me.team) : teams;
  const others = me.team ? teams.filter(x => x.t.name !== me.team) : [];
  const block = ({ t, n }) => (
    <article class="team-card" key={t.name} aria-labelledby={`team-${t.name}`}>
      <h2 id={`team-${t.name}`}><span class="swatch" style={{ background: teamColour(t.name) }} aria-hidden="true" />{t.name}</h2>
      <QuotaBar label="All GPU kinds" n={n} scale={scale} />
      {byKind(t).map(([kind, kn]) => <QuotaBar key={kind} label={kind} n={kn} scale={scale} />)}
      <p>Allocated {fmtNumber(n.allocated, 1)} GPUs; guarantee {fmtNumber(n.guaranteed, 1)} GPUs; fair share {n.fair === null ? '—' : `${fmtNumber(n.fair, 1)} GPUs`};
        pending demand {typeof t.pending_gpus === 'number' ? `${fmtNumber(t.pending_gpus, 1)} GPUs` : '—'}.</p>
      <p>Usage against fair share: {n.fair ? `${fmtNumber((100 * n.allocated) / n.fair, 0)} %` : '—'}
        {typeof t.running_jobs === 'number' ? ` · ${t.running_jobs} running, ${t.pending_jobs ?? 0} pending` : ''}</p>
    </article>
  );
  return (
    <section aria-labelledby="team-title">
      <h1 id="team-title" tabIndex={-1}>Team</h1>
      <p class="legend"><span class="seg alloc" /> allocated within guarantee <span class="seg borrowed" /> borrowed
        <span class="mark guarantee" /> guarantee <span class="mark fair" /> fair share <span class="mark limit" /> limit</p>
      {mine.map(block)}
      <h2>Who borrows from whom</h2>
      {me.role !== 'admin' && others.length === 0 && <p>Only your team's figures are shown to you; other teams' use is not visible here.</p>}
      {borrowers.length === 0 ? <p>{me.role === 'admin' || others.length > 0 ? 'No team is above its guarantee.' : `${me.team} is not above its guarantee.`}</p> : (
        <ul>
          {borrowers.map(({ t, n }) => (
            <li key={t.name}>{t.name} borrows {fmtNumber(n.borrowed, 1)} GPUs
              {lenders.length ? ` from the unused guarantees of ${lenders.map(l => `${l.t.name} (${fmtNumber(l.n.guaranteed - l.n.allocated, 1)} idle)`).join(', ')}` : ' from unguaranteed capacity'}.</li>
          ))}
        </ul>
      )}
      {others.length > 0 && <><h2>Other teams</h2>{others.map(block)}</>}
    </section>
  );
}
