// Plain helpers over the API's job objects.
export const PRIORITY_CLASSES = ['production-inference', 'inference', 'training-high', 'training', 'best-effort'];

export function canChange(me, job) {
  if (!me || !job) return false;
  if (me.role === 'admin') return true;
  if (me.role === 'team-lead') return job.team === me.team;
  if (me.role === 'member') return job.team === me.team && (!job.user || job.user === me.user);
  return false;
}

export function isActive(job) { return job.state === 'Pending' || job.state === 'Running' || job.state === 'Preempted'; }

export function gpuCount(job) {
  if (typeof job.gpus === 'number') return job.gpus;
  if (typeof job.gpu_milli_total === 'number') return job.gpu_milli_total / 1000;
  const n = job.workers || job.replicas || 1;
  if (job.gpus_per_worker) return n * job.gpus_per_worker;
  if (job.gpu_fraction) return n * job.gpu_fraction;
  if (job.gpu_milli) return (n * job.gpu_milli) / 1000;
  if (job.mig_profile) return null;
  return null;
}

export function tasksOf(job) { return job.workers || job.replicas || job.tasks || 1; }

// Tasks placed: from running_tasks when the API gives it, else from the placements.
export function tasksRunning(job) {
  if (typeof job.running_tasks === 'number') return job.running_tasks;
  if (typeof job.tasks_running === 'number') return job.tasks_running;
  if (job.state !== 'Running') return 0;
  const p = job.placements || [];
  const tasks = new Set(p.map((x, i) => (x.task !== undefined ? x.task : i)));
  return Math.min(tasksOf(job), Math.max(tasks.size, p.length ? 1 : 0)) || tasksOf(job);
}

export function positionOf(q) {
  if (!q) return null;
  const team = q.team_position ?? null;
  const pool = q.pool_position ?? q.queue_position ?? q.position ?? null;
  return { team, pool };
}
