import { useMemo, useRef, useState } from 'preact/hooks';
import { api, listOf, serviceNow } from '../api.js';
import { usePoll, teamColour, fmtNumber } from '../util.js';
import { TimeChart } from '../chart.jsx';

const RANGES = [[900, '15 minutes'], [3600, '1 hour'], [6 * 3600, '6 hours'], [24 * 3600, '24 hours'], [7 * 86400, '7 days']];

// Memory slices of a MIG profile when the API does not say (80/96 GB parts: 8 slices of 1/8 the memory).
export function profileSlices(profile, memorySlices = 8) {
  const m = /^(\d)g\.(\d+)gb/.exec(profile || '');
  if (!m) return 1;
  const g = Number(m[1]);
  const gb = Number(m[2]);
  if (g >= 7) return memorySlices;
  if (g >= 3) return memorySlices / 2;
  if (g === 2) return 2;
  return gb >= 20 ? 2 : 1;
}

function instancesOf(g) {
  const src = g.mig_instances || g.instances || (Array.isArray(g.mig) ? g.mig : null) || (g.mig_layout && g.mig_layout.instances) || [];
  return src;
}

// The cluster as the grid draws it, from GET /api/v1/cluster (tolerant of field spellings).
export function normalizeCluster(c) {
  const nodes = listOf(c, 'nodes').map(n => {
    const kind = n.gpu_kind || n.kind || n.model || '';
    const gpus = (n.gpus || []).map((g, i) => {
      const slices = g.mig_memory_slices || n.mig_memory_slices || 8;
      const inst = instancesOf(g).map(x => ({
        profile: x.profile || x.mig_profile, start: x.start ?? x.mig_start ?? 0,
        size: x.size ?? x.memory_slices ?? profileSlices(x.profile || x.mig_profile, slices),
        team: x.team || '', job: x.job ?? x.job_id ?? '', allocated: x.allocated ?? !!(x.job ?? x.job_id ?? x.team),
      }));
      const milli = g.allocated_milli ?? (typeof g.allocated === 'number' ? g.allocated : null) ?? 0;
      return {
        index: g.index ?? i, kind: g.kind || g.model || kind, slices,
        mig: !!(g.mig_enabled || g.mig_mode || inst.length), instances: inst,
        allocated_milli: milli, utilisation: g.utilisation ?? g.utilization ?? null,
        teams: g.teams || (g.team ? [g.team] : [...new Set(inst.map(x => x.team).filter(Boolean))]),
      };
    });
    return { name: n.name, kind, tier: n.tier || n.pricing_tier || '', leaf: n.leaf || n.rack || '', gpus, healthy: n.healthy !== false };
  });
  return { nodes, totals: c.totals || {} };
}

function utilisationPoint(cl) {
  let total = 0, alloc = 0, used = 0, haveUsed = false;
  for (const n of cl.nodes) for (const g of n.gpus) {
    total += 1;
    alloc += g.mig ? g.instances.filter(x => x.allocated).reduce((s, x) => s + x.size, 0) / g.slices : g.allocated_milli / 1000;
    if (typeof g.utilisation === 'number') { haveUsed = true; used += g.utilisation > 1 ? g.utilisation / 100 : g.utilisation; }
  }
  return { total, alloc, used: haveUsed ? used : null };
}

function Gpu({ g, node }) {
  const label = g.mig
    ? `GPU ${g.index}, ${g.kind}, MIG: ${g.instances.map(x => `${x.profile} at ${x.start}${x.allocated ? ` (${x.team || 'in use'})` : ' (free)'}`).join(', ') || 'no instances'}`
    : `GPU ${g.index}, ${g.kind}, ${g.allocated_milli ? `${fmtNumber(g.allocated_milli / 10, 0)} % allocated${g.teams.length ? ` to ${g.teams.join(', ')}` : ''}` : 'idle'}`;
  return (
    <div class={`gpu${g.mig ? ' mig' : ''}`} data-testid="gpu" data-node={node.name} data-index={g.index} role="img" aria-label={label} title={label}>
      {g.mig ? (
        <div class="slices" style={{ '--slices': g.slices }}>
          {Array.from({ length: g.slices }, (_, s) => <span key={s} class="slice" style={{ gridColumn: `${s + 1}` }} />)}
          {g.instances.map((x, k) => (
            <span key={k} class={`inst${x.allocated ? '' : ' free'}`} data-testid="mig-instance" data-profile={x.profile} data-start={x.start}
              style={{ gridColumn: `${x.start + 1} / span ${x.size}`, background: x.allocated ? teamColour(x.team || 'x') : undefined }}>
              <span class="inst-label">{x.profile}</span>
            </span>
          ))}
        </div>
      ) : (
        <div class="fill" style={{ width: `${Math.min(100, g.allocated_milli / 10)}%`, background: teamColour(g.teams[0] || 'x') }} />
      )}
    </div>
  );
}

function FreeByShape({ cl }) {
  const wholeFree = new Map();
  const migFree = new Map();
  for (const n of cl.nodes) {
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
}

async function loadHistory(range) {
  const to = Math.floor(serviceNow());
  const j = await api('GET', `/api/v1/cluster/history?from=${Math.max(0, to - range)}&to=${to}`);
  return listOf(j, 'points');
}

export function Cluster() {
  const [range, setRange] = useState(3600);
  const local = useRef([]); // samples seen by this page, used when the server keeps no history
  const { data, error } = usePoll(async () => normalizeCluster(await api('GET', '/api/v1/cluster')), [], 3000);
  const hist = usePoll(() => loadHistory(range).catch(() => null), [range], 10000);
  const cl = data;
  if (cl) {
    const p = utilisationPoint(cl);
    const t = serviceNow();
    const last = local.current[local.current.length - 1];
    if (!last || t > last.t) local.current.push({ t, ...p });
    if (local.current.length > 5000) local.current.shift();
  }
  const chartData = useMemo(() => {
    const from = serviceNow() - range;
    const pts = hist.data && hist.data.length
      ? hist.data.map(p => ({ t: p.t ?? p.at, total: p.total_gpus || 1, alloc: p.allocated_gpus, used: p.used_gpus ?? null }))
      : local.current;
    const sel = pts.filter(p => p.t >= from);
    return [sel.map(p => p.t), sel.map(p => (100 * p.alloc) / (p.total || 1)), sel.map(p => (p.used === null ? null : (100 * p.used) / (p.total || 1)))];
  }, [hist.data, range, cl]);
  if (error && !cl) return <section><h1 tabIndex={-1}>Cluster</h1><p class="error" role="alert">{error.message}</p></section>;
  const now = cl ? utilisationPoint(cl) : null;
  return (
    <section aria-labelledby="cluster-title">
      <h1 id="cluster-title" tabIndex={-1}>Cluster</h1>
      {now && <p>{now.total} GPUs on {cl.nodes.length} nodes; {fmtNumber((100 * now.alloc) / (now.total || 1), 1)} % allocated
        {now.used !== null ? `, ${fmtNumber((100 * now.used) / (now.total || 1), 1)} % used` : ''}.</p>}
      <h2>Utilisation and allocation</h2>
      <div class="toolbar">
        <label for="range">Range</label>
        <select id="range" value={range} onChange={e => setRange(Number(e.currentTarget.value))}>
          {RANGES.map(([s, l]) => <option key={s} value={s}>{l}</option>)}
        </select>
        {!(hist.data && hist.data.length) && <small>From this page's samples (the server kept no history for the range).</small>}
      </div>
      <TimeChart testid="utilisation-chart" data={chartData} yLabel="% of GPUs"
        label={`Allocation and utilisation over the last ${RANGES.find(r => r[0] === range)[1]}`}
        series={[{ label: 'allocated %', colour: '#2563eb', fill: 'rgba(37,99,235,0.12)' }, { label: 'used %', colour: '#16a34a' }]} />
      <h2>Free capacity by shape</h2>
      {cl ? <FreeByShape cl={cl} /> : <p role="status">Loading…</p>}
      <h2>GPUs</h2>
      <p class="legend">Each box is a GPU; MIG GPUs show their instances at their slice positions (hatched: idle slices; outlined: free instances); colours are teams.</p>
      <div class="gpu-grid" data-testid="gpu-grid">
        {cl && cl.nodes.map(n => (
          <div class="node" key={n.name} role="group" aria-label={`Node ${n.name}, ${n.kind}${n.tier ? `, tier ${n.tier}` : ''}`}>
            <div class="node-head"><span>{n.name}</span> <span class="sub">{n.kind}{n.tier ? ` · ${n.tier}` : ''}</span></div>
            <div class="gpus">{n.gpus.map(g => <Gpu key={g.index} g={g} node={n} />)}</div>
          </div>
        ))}
      </div>
    </section>
  );
}
