import { useState } from 'preact/hooks';
import { api, listOf, serviceNow } from '../api.js';
import { usePoll, fmtNumber, usd } from '../util.js';

const PERIODS = [[3600, 'Last hour'], [6 * 3600, 'Last 6 hours'], [86400, 'Last 24 hours'], [7 * 86400, 'Last 7 days'], [0, 'Since the ledger began']];
const TIER_COLOURS = ['#2563eb', '#f59e0b', '#16a34a', '#db2777', '#7c3aed', '#0891b2'];

function isIdle(r) { return r.idle === true || r.kind === 'idle' || (!r.team && !r.project && !r.job); }

function query(groupBy, period, format) {
  const q = new URLSearchParams({ group_by: groupBy });
  if (period) { const to = Math.floor(serviceNow()); q.set('from', String(Math.max(0, to - period))); q.set('to', String(to)); }
  if (format) q.set('format', format);
  return `/api/v1/usage?${q}`;
}

// GPU-hours (or cost) per group, stacked by tier, idle apart.
function Bars({ rows, groupBy, metric }) {
  const groups = new Map();
  const tiers = [];
  for (const r of rows) {
    const key = isIdle(r) ? 'idle' : (r[groupBy] || '—');
    const tier = r.tier || 'default';
    if (!tiers.includes(tier)) tiers.push(tier);
    const g = groups.get(key) || {};
    g[tier] = (g[tier] || 0) + (r[metric] || 0);
    groups.set(key, g);
  }
  const total = g => Object.values(g).reduce((a, b) => a + b, 0);
  const max = Math.max(1e-9, ...[...groups.values()].map(total));
  const unit = metric === 'cost' ? ' USD' : ' GPU-h';
  return (
    <figure class="hbars" role="img" aria-label={`${metric === 'cost' ? 'Cost' : 'GPU-hours'} per ${groupBy}, by tier: ` +
      [...groups.entries()].map(([k, g]) => `${k} ${fmtNumber(total(g), 1)}${unit}`).join('; ')}>
      <p class="legend">{tiers.map((t, i) => <span key={t}><span class="seg" style={{ background: TIER_COLOURS[i % TIER_COLOURS.length] }} /> {t} </span>)}</p>
      {[...groups.entries()].sort((a, b) => total(b[1]) - total(a[1])).map(([k, g]) => (
        <div class="hbar" key={k}>
          <span class="hbar-label">{k}</span>
          <span class="hbar-track">
            {tiers.map((t, i) => g[t] ? <span key={t} class={`seg${k === 'idle' ? ' idle' : ''}`} style={{ width: `${(100 * g[t]) / max}%`, background: TIER_COLOURS[i % TIER_COLOURS.length] }} title={`${t}: ${fmtNumber(g[t], 2)}${unit}`} /> : null)}
          </span>
          <span class="hbar-value">{fmtNumber(total(g), 1)}{unit}</span>
        </div>
      ))}
    </figure>
  );
}

export function Chargeback({ me }) {
  const [groupBy, setGroupBy] = useState('team');
  const [period, setPeriod] = useState(0);
  const [metric, setMetric] = useState('gpu_hours');
  const { data, error } = usePoll(async () => listOf(await api('GET', query(groupBy, period)), 'rows'), [groupBy, period], 10000);
  const rows = data || [];
  const sum = k => rows.reduce((a, r) => a + (r[k] || 0), 0);
  return (
    <section aria-labelledby="cb-title">
      <h1 id="cb-title" tabIndex={-1}>Chargeback</h1>
      <p>GPU-hours and cost {me.role === 'admin' ? 'of every team' : `of team ${me.team} (with its share of idle capacity)`}, on the service's clock.</p>
      <div class="toolbar">
        <label for="cb-period">Period</label>
        <select id="cb-period" value={period} onChange={e => setPeriod(Number(e.currentTarget.value))}>
          {PERIODS.map(([s, l]) => <option key={s} value={s}>{l}</option>)}
        </select>
        <label for="cb-group">Group by</label>
        <select id="cb-group" value={groupBy} onChange={e => setGroupBy(e.currentTarget.value)}>
          <option value="team">team</option><option value="project">project</option><option value="job">job</option>
        </select>
        <label for="cb-metric">Chart</label>
        <select id="cb-metric" value={metric} onChange={e => setMetric(e.currentTarget.value)}>
          <option value="gpu_hours">GPU-hours</option><option value="cost">cost</option>
        </select>
        <span class="downloads">Download: <a href={query(groupBy, period, 'csv')} download="tessera-usage.csv">CSV</a>{' '}
          <a href={query(groupBy, period, 'focus')} download="tessera-usage-focus.csv">FOCUS</a></span>
      </div>
      {error && <p class="error" role="alert">Could not load usage: {error.message}</p>}
      <Bars rows={rows} groupBy={groupBy} metric={metric} />
      <div class="table-wrap">
        <table data-testid="chargeback" class="compact">
          <caption class="sr-only">Usage by {groupBy} and tier</caption>
          <thead><tr><th scope="col">{groupBy === 'job' ? 'Job' : groupBy === 'project' ? 'Project' : 'Team'}</th>
            {groupBy !== 'team' && <th scope="col">Team</th>}<th scope="col">Tier</th><th scope="col">Kind</th>
            <th scope="col" class="num">GPU-hours</th><th scope="col" class="num">Cost (USD)</th></tr></thead>
          <tbody>
            {rows.map((r, i) => (
              <tr key={i} class={isIdle(r) ? 'idle' : ''}>
                <td>{isIdle(r) ? 'idle' : (r[groupBy] || '—')}</td>
                {groupBy !== 'team' && <td>{r.team || '—'}</td>}
                <td>{r.tier || '—'}</td><td>{isIdle(r) ? 'idle' : 'allocated'}</td>
                <td class="num">{fmtNumber(r.gpu_hours, 2)} GPU-h</td><td class="num">{usd(r.cost)}</td>
              </tr>
            ))}
            {data && rows.length === 0 && <tr><td colSpan={6}>No usage in this period.</td></tr>}
          </tbody>
          <tfoot><tr><th scope="row">Total</th>{groupBy !== 'team' && <td />}<td /><td />
            <td class="num">{fmtNumber(sum('gpu_hours'), 2)} GPU-h</td><td class="num">{usd(sum('cost'))}</td></tr></tfoot>
        </table>
      </div>
    </section>
  );
}
