import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

// A uPlot time-series chart; `data` is [xs, ...ys] and `series` names the ys.
export function TimeChart({ data, series, yLabel, testid, label, height = 240 }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const opts = {
      width: box.current.clientWidth || 800, height,
      scales: { x: { time: true }, y: { range: [0, 100] } },
      axes: [{ label: 'service time (UTC)' }, { label: yLabel }],
      tzDate: ts => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      series: [{ label: 'time' }, ...series.map(s => ({ label: s.label, stroke: s.colour, width: 2, fill: s.fill }))],
    };
    plot.current = new uPlot(opts, data, box.current);
    const ro = new ResizeObserver(() => plot.current.setSize({ width: box.current.clientWidth, height }));
    ro.observe(box.current);
    return () => { ro.disconnect(); plot.current.destroy(); };
  }, []);
  useEffect(() => { if (plot.current) plot.current.setData(data); }, [data]);
  return <figure class="chart" data-testid={testid} role="img" aria-label={label}><div ref={box} /></figure>;
}
