import { useEffect, useRef, useState, useCallback } from 'preact/hooks';
import { serviceNow } from './api.js';

// `next` with each part that equals the same part of `prev` (plain JSON values, compared deeply) replaced by
// `prev`'s own object, so that an unchanged part of a poll's answer keeps its identity and the memoised
// components that draw it skip the refresh. Array items are matched by `id` or `name` when they have one
// (a list that gains an item at the top keeps its other items), else by position.
export function keepEqual(prev, next) {
  if (prev === next || prev === null || next === null || typeof prev !== 'object' || typeof next !== 'object') return next;
  if (Array.isArray(prev) !== Array.isArray(next)) return next;
  if (Array.isArray(next)) {
    const byKey = new Map();
    for (const x of prev) { const k = itemKey(x); if (k !== undefined) byKey.set(k, x); }
    let same = prev.length === next.length;
    const out = next.map((x, i) => {
      const k = itemKey(x);
      const kept = keepEqual(k !== undefined && byKey.has(k) ? byKey.get(k) : prev[i], x);
      if (kept !== prev[i]) same = false;
      return kept;
    });
    return same ? prev : out;
  }
  if (Object.getPrototypeOf(prev) !== Object.prototype || Object.getPrototypeOf(next) !== Object.prototype) return next;
  const keys = Object.keys(next);
  let same = keys.length === Object.keys(prev).length;
  const out = {};
  for (const k of keys) {
    out[k] = keepEqual(prev[k], next[k]);
    if (out[k] !== prev[k] || !(k in prev)) same = false;
  }
  return same ? prev : out;
}
function itemKey(x) {
  if (!x || typeof x !== 'object' || Array.isArray(x)) return undefined;
  const k = x.id ?? x.name;
  return typeof k === 'string' || typeof k === 'number' ? `${typeof k}:${k}` : undefined;
}

// Runs `load` now and every `ms` while the page is visible; `deps` restart it. Each answer keeps the objects
// of the previous one that it equals (keepEqual).
export function usePoll(load, deps, ms = 2000) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const gen = useRef(0);
  const run = useCallback(async () => {
    const g = gen.current;
    try {
      const data = await load();
      if (g === gen.current) setState(s => ({ data: keepEqual(s.data, data), error: null, loading: false }));
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

// toLocaleString with options builds an Intl.NumberFormat on every call (tens of microseconds, which add up
// over the cluster page's hundreds of GPUs on every poll): one formatter per digit count, kept.
const formats = new Map();
function numberFormat(digits) {
  let f = formats.get(digits);
  if (!f) {
    f = new Intl.NumberFormat('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
    formats.set(digits, f);
  }
  return f;
}

export function fmtNumber(x, digits = 1) {
  if (x === null || x === undefined || !isFinite(x)) return '—';
  return numberFormat(digits).format(Number(x));
}

// An absolute service time as "HH:MM UTC" (with the date when not the service's today).
export function clockTime(t) {
  if (!isTime(t)) return '—';
  const d = new Date(sec(t) * 1000).toISOString();
  const today = new Date(serviceNow() * 1000).toISOString().slice(0, 10);
  return `${d.slice(0, 10) === today ? '' : `${d.slice(0, 10)} `}${d.slice(11, 16)} UTC`;
}
// A relative phrase for a service time: "in 2 h", "5 min ago".
export function relative(t) {
  if (!isTime(t)) return '';
  const d = sec(t) - serviceNow();
  if (Math.abs(d) < 60) return d >= 0 ? 'within a minute' : 'just now';
  return d > 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}
// GPUs to one decimal with the unit ("2 GPUs", "0.3 GPU").
export function gpuText(g) {
  if (g === null || g === undefined || !isFinite(g)) return '—';
  const s = Number.isInteger(g) ? String(g) : g.toFixed(1);
  return `${s} GPU${g === 1 || g < 1 ? '' : 's'}`;
}
// Money with its currency and two decimals.
export function usd(x) {
  if (x === null || x === undefined || !isFinite(x)) return '—';
  return `$${numberFormat(2).format(Number(x))}`;
}
