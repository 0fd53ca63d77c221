import { useEffect, useRef, useState, useCallback } from 'preact/hooks';
import { serviceNow } from './api.js';

// Runs `load` now and every `ms` while the page is visible; `deps` restart it.
export function usePoll(load, deps, ms = 2000) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const gen = useRef(0);
  const run = useCallback(async () => {
    const g = gen.current;
    try {
      const data = await load();
      if (g === gen.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (g === gen.current) setState(s => ({ data: s.data, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    gen.current++;
    setState(s => ({ ...s, loading: true }));
    run();
    if (!ms) return undefined;
    const id = setInterval(() => { if (!document.hidden) run(); }, ms);
    return () => { clearInterval(id); gen.current++; };
  }, [run, ms]);
  return { ...state, reload: run };
}

export function gpus(milli) {
  if (milli === null || milli === undefined) return '—';
  const g = milli / 1000;
  return Number.isInteger(g) ? String(g) : g.toFixed(2);
}

// Reads a quantity given either in GPUs (`x_gpus`) or milli-GPUs (`x_milli`).
export function gpuField(o, name) {
  if (!o) return null;
  if (typeof o[`${name}_gpus`] === 'number') return o[`${name}_gpus`];
  if (typeof o[`${name}_milli`] === 'number') return o[`${name}_milli`] / 1000;
  if (typeof o[name] === 'number') return o[name];
  return null;
}

export function duration(s) {
  if (s === null || s === undefined || !isFinite(s)) return '—';
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) { const h = Math.floor(s / 3600); const m = Math.floor((s % 3600) / 60); return m ? `${h} h ${m} min` : `${h} h`; }
  const d = Math.floor(s / 86400); const h = Math.floor((s % 86400) / 3600);
  return h ? `${d} d ${h} h` : `${d} d`;
}

// The API's times (ISO 8601 UTC strings or Unix seconds, on the service's clock) as Unix seconds, or null.
export function sec(t) {
  if (typeof t === 'number') return t >= 0 ? t : null;
  if (typeof t === 'string' && t) { const ms = Date.parse(t); return isNaN(ms) ? null : ms / 1000; }
  return null;
}
// Times are shown relative to the service clock (which may run faster than the wall: `--speed`).
export function isTime(t) { return sec(t) !== null; }
export function ago(t) { return isTime(t) ? `${duration(serviceNow() - sec(t))} ago` : '—'; }
export function until(t) {
  if (!isTime(t)) return '—';
  const d = sec(t) - serviceNow();
  return d <= 0 ? 'next cycle' : `in ${duration(d)}`;
}

// A stable colour per team name.
export function teamColour(name) {
  if (!name) return 'var(--free)';
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 62% 48%)`;
}

export function reasonText(r) {
  if (!r) return '';
  if (typeof r === 'string') return r;
  return r.message || r.code || '';
}

export function fmtNumber(x, digits = 1) {
  if (x === null || x === undefined || !isFinite(x)) return '—';
  return Number(x).toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
