import { memo } from 'preact/compat';
import { useMemo, useRef, useState } from 'preact/hooks';
import { api, allPages, listOf, serviceNow } from '../api.js';
import { usePoll, teamColour, fmtNumber, sec } from '../util.js';
import { TimeChart } from '../chart.jsx';

const RANGES = [[900, '15 minutes'], [3600, '1 hour'], [6 * 3600, '6 hours'], [24 * 3600, '24 hours'], [7 * 86400, '7 days']];

// Memory slices of a MIG instance when the API does not say: the profile's memory over one slice's share
// of the GPU kind's memory (e.g. 1g.10gb is 1 of 8 slices on a100-80gb, 2 of 8 on a100-40gb).
export function profileSlices(profile, kind, memorySlices = 8) {
  const m = /^(\d)g\.(\d+)gb/.exec(profile || '');
  if (!m) return 1;
  if (Number(m[1]) >= 7) return memorySlices;
  const k = /(\d+)gb/i.exec(kind || '');
  const kindGb = k ? Number(k[1]) : 80;
  return Math.min(memorySlices, Math.max(1, Math.round(Number(m[2]) / (kindGb / memorySlices))));
}

function instancesOf(g) {
  if (Array.isArray(g.mig_layout)) return g.mig_layout;
  return g.mig_instances || g.instances || (Array.isArray(g.mig) ? g.mig : null) || (g.mig_layout && g.mig_layout.instances) || [];
}

// Which team holds each GPU / MIG instance, from the placements of the running jobs the caller may see
// (others' allocations stay unlabelled).
export function holders(runningJobs) {
  const m = new Map();
  for (const j of runningJobs || []) {
    for (const p of j.placements || []) {
      for (const g of p.gpus || []) {
        const key = g.mig_profile ? `${p.node}/${g.index}/${g.mig_start}` : `${p.node}/${g.index}`;
        const e = m.get(key) || { teams: new Set(), jobs: [] };
        e.teams.add(j.team);
        e.jobs.push(j.name);
        m.set(key, e);
      }
    }
  }
  return m;
}

// The cluster as the grid draws it, from GET /api/v1/cluster (tolerant of field spellings).
export function normalizeCluster(c, held = new Map()) {
  const nodes = listOf(c, 'nodes').map(n => {
    const kind = n.gpu_kind || n.kind || n.model || '';
    const gpus = (n.gpus || []).map((g, i) => {
      const index = g.index ?? i;
      const gkind = g.kind || g.model || kind;
      const slices = g.mig_memory_slices || n.mig_memory_slices || (/a30/i.test(gkind) ? 4 : 8);
      const inst = instancesOf(g).map(x => {
        const profile = x.profile || x.mig_profile;
        const start = x.start ?? x.mig_start ?? 0;
        const h = held.get(`${n.name}/${index}/${start}`);
        return {
          profile, start, size: x.memory_slices ?? x.size ?? profileSlices(profile, gkind, slices),
          team: x.team || (h ? [...h.teams].join(', ') : ''), job: x.job ?? (h ? h.jobs.join(', ') : ''),
          allocated: x.busy ?? x.allocated ?? !!(x.job ?? x.team),
        };
      });
      const h = held.get(`${n.name}/${index}`);
      const milli = g.allocated_milli ?? (typeof g.allocated === 'number' ? g.allocated : null) ?? 0;
      const mig = !!(g.mig_enabled || g.mig_mode || inst.length);
      return {
        index, kind: gkind, slices, mig, instances: inst,
        allocated_milli: milli, utilisation: typeof g.used === 'number' ? g.used : null,
        teams: g.teams || (g.team ? [g.team] : h ? [...h.teams] : [...new Set(inst.map(x => x.team).filter(Boolean))]),
      };
    });
    return { name: n.name, kind, tier: n.tier || n.pricing_tier || '', leaf: n.leaf || n.rack || '', state: n.state || 'ready', gpus };
  });
  return { nodes, totals: c.totals || {}, at: c.at };
}

// Allocated GPUs (MIG instances by their compute share) and busy GPUs (holding any task) of a cluster view.
function utilisationPoint(cl) {
  let total = 0, alloc = 0, used = 0;
  for (const n of cl.nodes) for (const g of n.gpus) {
    total += 1;
    alloc += g.allocated_milli / 1000;
    used += g.allocated_milli > 0 || g.instances.some(x => x.allocated) ? 1 : 0;
  }
  return { total, alloc, used };
}

// Drawn again only when its GPU changed: a poll's unchanged GPUs and nodes keep their objects (keepEqual).
const Gpu = memo(({ g, nodeName }) => {
  const label = g.mig
    ? `GPU ${g.index}, ${g.kind}, MIG: ${g.instances.map(x => `${x.profile} at ${x.start}${x.allocated ? ` (${x.team || 'in use'}${x.job ? `: ${x.job}` : ''})` : ' (free)'}`).join(', ') || 'no instances'}`
    : `GPU ${g.index}, ${g.kind}, ${g.allocated_milli ? `${fmtNumber(g.allocated_milli / 10, 0)} % allocated${g.teams.length ? ` to ${g.teams.join(', ')}` : ''}` : 'idle'}`;
  return (
    <div class={`gpu${g.mig ? ' mig' : ''}`} data-testid="gpu" data-node={nodeName} data-index={g.index} role="img" aria-label={label} title={label}>
      {g.mig ? (
        <div class="slices" style={{ '--slices': g.slices }}>
          {Array.from({ length: g.slices }, (_, s) => <span key={s} class="slice" style={{ gridColumn: `${s + 1}` }} />)}
          {g.instances.map((x, k) => (
            <span key={k} class={`inst${x.allocated ? '' : ' free'}`} data-testid="mig-instance" data-profile={x.profile} data-start={x.start}
              title={`${x.profile} at slice ${x.start}: ${x.allocated ? `${x.team || 'in use'}${x.job ? ` (${x.job})` : ''}` : 'free'}`}
              style={{ gridColumn: `${x.start + 1} / span ${x.size}`, background: x.allocated ? (x.team ? teamColour(x.team) : 'var(--other)') : undefined }}>
              <span class="inst-label">{String(x.profile).split('.')[0]}</span>
            </span>
          ))}
        </div>
      ) : (
        <div class="fill" style={{ width: `${Math.min(100, g.allocated_milli / 10)}%`, background: g.teams[0] ? teamColour(g.teams[0]) : 'var(--other)' }} />
      )}
    </div>
  );
});

const Node = memo(({ n }) => (
  <div class={`node${n.state !== 'ready' ? ` node-${n.state}` : ''}`} role="group" data-testid="node" data-state={n.state}
    aria-label={`Node ${n.name}, ${n.kind}${n.tier ? `, tier ${n.tier}` : ''}${n.state !== 'ready' ? `, ${n.state}` : ''}`}>
    <div class="node-head"><span>{n.name}</span> <span class="sub">{n.kind}{n.tier ? ` · ${n.tier}` : ''}</span>
      {n.state !== 'ready' && <span class={`node-state ${n.state}`} data-testid="node-state">{n.state}</span>}</div>
    <div class="gpus">{n.gpus.map(g => <Gpu key={g.index} g={g} nodeName={n.name} />)}</div>
  </div>
));

// The colour of each team drawn in the grid, and what grey and the light boxes mean ("busy" vs "allocated").
const TeamLegend = memo(({ nodes }) => {
  const teams = new Set();
  for (const n of nodes) for (const g of n.gpus) {
    for (const t of g.teams || []) teams.add(t);
    for (const x of g.instances || []) if (x.team) teams.add(x.team);
  }
  return (
    <ul class="legend team-legend" aria-label="Colours of the GPU grid">
      {[...teams].sort().map(t => <li key={t}><span class="swatch" style={{ background: teamColour(t) }} aria-hidden="true" />{t}</li>)}
      <li><span class="swatch" style={{ background: 'var(--other)' }} aria-hidden="true" />allocated to a team you may not see</li>
      <li><span class="swatch" style={{ background: 'var(--free)', border: '1px solid #cbd5e1' }} aria-hidden="true" />idle</li>
      <li>Allocated: held by a job; busy: a GPU with at least one task on it.</li>
    </ul>
  );
});

const FreeByShape = memo(({ nodes }) => {
  const wholeFree = new Map();
  const migFree = new Map();
  for (const n of nodes) {
    const free = n.gpus.filter(g => !g.mig && !g.allocated_milli).length;
    const key = `${n.kind}: ${free}`;
    wholeFree.set(key, (wholeFree.get(key) || 0) + 1);
    for (const g of n.gpus) for (const x of g.instances) if (!x.allocated) migFree.set(x.profile, (migFree.get(x.profile) || 0) + 1);
  }
  const whole = [...wholeFree.entries()].map(([k, v]) => { const [kind, free] = k.split(': '); return { kind, free: Number(free), nodes: v }; })
    .sort((a, b) => a.kind.localeCompare(b.kind) || b.free - a.free);
  return (
    <div class="two-col">
      <table class="compact">
        <caption>Whole free GPUs per node</caption>
        <thead><tr><th scope="col">GPU kind</th><th scope="col">Free GPUs on the node</th><th scope="col">Nodes</th></tr></thead>
        <tbody>{whole.map(r => <tr key={`${r.kind}${r.free}`}><td>{r.kind}</td><td class="num">{r.free}</td><td class="num">{r.nodes}</td></tr>)}</tbody>
      </table>
      <table class="compact">
        <caption>Free MIG instances per profile</caption>
        <thead><tr><th scope="col">Profile</th><th scope="col">Free instances</th></tr></thead>
        <tbody>
          {[...migFree.entries()].sort().map(([p, v]) => <tr key={p}><td>{p}</td><td class="num">{v}</td></tr>)}
          {migFree.size === 0 && <tr><td colSpan={2}>None free.</td></tr>}
        </tbody>
      </table>
    </div>
  );
});

async function loadHistory(range) {
  const to = Math.floor(serviceNow());
  const j = await api('GET', `/api/v1/cluster/history?from=${Math.max(0, to - range)}&to=${to}`);
  return listOf(j, 'points');
}

export function Cluster() {
  const [range, setRange] = useState(3600);
  const local = useRef([]); // samples seen by this page, used when the server keeps no history
  const { data, error } = usePoll(async () => {
    const [c, running] = await Promise.all([api('GET', '/api/v1/cluster'),
      allPages('/api/v1/jobs?state=Running&page_size=1000', 'jobs').catch(() => [])]);
    return normalizeCluster(c, holders(running));
  }, [], 3000);
  const hist = usePoll(() => loadHistory(range).catch(() => null), [range], 10000);
  const cl = data;
  const now = useMemo(() => (cl ? utilisationPoint(cl) : null), [cl && cl.nodes]);
  if (cl) {
    const t = serviceNow();
    const last = local.current[local.current.length - 1];
    if (!last || t > last.t) local.current.push({ t, ...now });
    if (local.current.length > 5000) local.current.shift();
  }
  // With the server's history the chart changes with that history only, not with every poll of the cluster.
  const fromHistory = !!(hist.data && hist.data.length);
  const chartData = useMemo(() => {
    const from = serviceNow() - range;
    const pts = fromHistory
      ? hist.data.map(p => ({ t: sec(p.t ?? p.at), total: p.total_gpus || 1, alloc: p.allocated_gpus, used: p.busy_gpus ?? p.used_gpus ?? null }))
      : local.current;
    const sel = pts.filter(p => p.t >= from);
    return [sel.map(p => p.t), sel.map(p => (100 * p.alloc) / (p.total || 1)), sel.map(p => (p.used === null ? null : (100 * p.used) / (p.total || 1)))];
  }, [hist.data, range, fromHistory ? null : cl]);
  if (error && !cl) return <section><h1 tabIndex={-1}>Cluster</h1><p class="error" role="alert">{error.message}</p></section>;
  return (
    <section aria-labelledby="cluster-title">
      <h1 id="cluster-title" tabIndex={-1}>Cluster</h1>
      {now && <p>{now.total} GPUs on {cl.nodes.length} nodes; {fmtNumber((100 * now.alloc) / (now.total || 1), 1)} % allocated,{' '}
        {fmtNumber((100 * now.used) / (now.total || 1), 1)} % of GPUs busy (holding a task).</p>}
      <h2>Utilisation and allocation</h2>
      <div class="toolbar">
        <label for="range">Range</label>
        <select id="range" value={range} onChange={e => setRange(Number(e.currentTarget.value))}>
          {RANGES.map(([s, l]) => <option key={s} value={s}>{l}</option>)}
        </select>
        {!fromHistory && <small>From this page's samples (the server kept no history for the range).</small>}
      </div>
      <TimeChart testid="utilisation-chart" data={chartData} yLabel="% of GPUs"
        label={`Allocation and utilisation over the last ${RANGES.find(r => r[0] === range)[1]}`}
        series={[{ label: 'allocated %', colour: '#2563eb', fill: 'rgba(37,99,235,0.12)' }, { label: 'busy GPUs %', colour: '#16a34a' }]} />
      <h2>Free capacity by shape</h2>
      {cl ? <FreeByShape nodes={cl.nodes} /> : <p role="status">Loading…</p>}
      <h2>GPUs</h2>
      <p class="legend">Each box is a GPU; MIG GPUs show their instances at their slice positions (hatched: idle slices; outlined: free instances); colours are teams. Nodes taking no new work are marked cordoned, draining (its jobs being stopped) or drained (empty).</p>
      {cl && <TeamLegend nodes={cl.nodes} />}
      <div class="gpu-grid" data-testid="gpu-grid">
        {cl && cl.nodes.map(n => <Node key={n.name} n={n} />)}
      </div>
    </section>
  );
}
