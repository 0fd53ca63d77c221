import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { PRIORITY_CLASSES } from '../jobmodel.js';

const MIG_PROFILES = ['1g.10gb', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb', '1g.12gb', '1g.24gb',
  '2g.24gb', '3g.48gb', '4g.48gb', '7g.96gb'];
const PRECISIONS = ['bf16', 'fp16', 'fp8', 'int8', 'int4', 'fp32'];
const EMPTY = {
  name: '', class: 'training', workers: '', gpus_per_worker: '', mig_profile: '', gpu_fraction: '',
  memory_gib: '', params_billion: '', precision: 'bf16', priority_class: 'training', project: '',
  checkpoint_interval_s: '', duration_s: '', image: '', command: '',
};

// The form's values as one workload entry of the job API (empty fields left to the server's defaults).
export function toWorkload(v) {
  const w = { name: v.name.trim(), class: v.class };
  const int = s => (s === '' ? undefined : Number(s));
  const n = int(v.workers);
  if (n !== undefined) w[v.class === 'training' ? 'workers' : 'replicas'] = n;
  if (v.gpus_per_worker !== '') w.gpus_per_worker = int(v.gpus_per_worker);
  if (v.mig_profile) w.mig_profile = v.mig_profile;
  if (v.gpu_fraction !== '') w.gpu_fraction = Number(v.gpu_fraction);
  if (v.memory_gib !== '') w.memory_gib = Number(v.memory_gib);
  else if (v.params_billion !== '') w.memory = { params_billion: Number(v.params_billion), precision: v.precision };
  if (v.priority_class) w.priority_class = v.priority_class;
  if (v.project.trim()) w.project = v.project.trim();
  if (v.checkpoint_interval_s !== '') w.checkpoint_interval_s = int(v.checkpoint_interval_s);
  if (v.duration_s !== '') w.duration_s = int(v.duration_s);
  if (v.image.trim()) {
    w.container = { image: v.image.trim() };
    const command = v.command.trim();
    if (command) w.container.command = command.split(/\s+/);
  }
  return w;
}

function Field({ id, label, api: apiField, errors, hint, children }) {
  const fields = Array.isArray(apiField) ? apiField : [apiField];
  const errs = fields.filter(f => errors[f]);
  const described = [hint ? `${id}-hint` : '', ...errs.map(f => `error-${f}`)].filter(Boolean).join(' ');
  return (
    <div class={`field${errs.length ? ' invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children({ id, 'aria-describedby': described || undefined, 'aria-invalid': errs.length ? 'true' : undefined })}
      {hint && <small id={`${id}-hint`}>{hint}</small>}
      {errs.map(f => <p key={f} class="error" id={`error-${f}`} data-testid={`error-${f}`}>{errors[f]}</p>)}
    </div>
  );
}

// The form's values from a job's submitted body (`spec`), to resubmit it with changes.
export function fromSpec(job) {
  const spec = (job && job.spec) || {};
  const str = x => (x === undefined || x === null ? '' : String(x));
  return {
    ...EMPTY, name: str(spec.name || job.name), class: spec.class || job.class || 'training',
    workers: str(spec.workers ?? spec.replicas), gpus_per_worker: str(spec.gpus_per_worker), mig_profile: spec.mig_profile || '',
    gpu_fraction: str(spec.gpu_fraction), memory_gib: str(spec.memory_gib), priority_class: spec.priority_class || job.priority_class || 'training',
    project: str(spec.project ?? job.project), checkpoint_interval_s: str(spec.checkpoint_interval_s), duration_s: str(spec.duration_s),
    image: str(spec.container && spec.container.image), command: ((spec.container && spec.container.command) || []).join(' '),
  };
}

export function SubmitForm({ onSubmitted, onClose, template }) {
  const [v, setV] = useState(template ? fromSpec(template) : EMPTY);
  const [yaml, setYaml] = useState('');
  const [errors, setErrors] = useState({});
  const [general, setGeneral] = useState('');
  const [busy, setBusy] = useState(false);
  const formRef = useRef(null);
  // Only the priority classes the caller's team may use (GET /api/v1/teams: a non-admin sees its team).
  const [classes, setClasses] = useState(PRIORITY_CLASSES);
  useEffect(() => {
    api('GET', '/api/v1/teams').then(j => {
      const teams = (j && j.teams) || [];
      if (teams.length === 1 && Array.isArray(teams[0].allowed_priority_classes)) {
        setClasses(PRIORITY_CLASSES.filter(c => teams[0].allowed_priority_classes.includes(c)));
      }
    }).catch(() => {});
  }, []);
  // Opening the form moves focus to its first field (the autofocus attribute only works at page load).
  useEffect(() => { const f = formRef.current && formRef.current.querySelector('#f-name'); if (f) f.focus(); }, []);
  const set = k => e => setV({ ...v, [k]: e.currentTarget.value });
  const inputs = ['name', 'workers', 'replicas', 'gpus_per_worker', 'mig_profile', 'gpu_fraction', 'memory_gib',
    'memory', 'priority_class', 'project', 'checkpoint_interval_s', 'duration_s', 'class', 'container.image',
    'container.command'];

  const submit = async e => {
    e.preventDefault();
    setErrors({});
    setGeneral('');
    let body;
    if (yaml.trim()) {
      try {
        const { load } = await import('js-yaml');
        body = load(yaml);
        if (body && Array.isArray(body.workloads)) body = body.workloads[0];
      } catch (err) {
        setErrors({ yaml: `The YAML does not parse: ${err.message.split('\n')[0]}` });
        return;
      }
    } else {
      body = toWorkload(v);
      if (template && template.spec && template.spec.team) body.team = template.spec.team;
    }
    setBusy(true);
    try {
      const job = await api('POST', '/api/v1/jobs', body);
      setV(EMPTY);
      setYaml('');
      onSubmitted(job);
    } catch (err) {
      const f = err.field || '';
      if (yaml.trim()) setErrors({ yaml: (f ? `${f}: ` : '') + err.message });
      else if (f && inputs.includes(f)) setErrors({ [f]: err.message });
      else if (f) { setErrors({ [f]: err.message }); setGeneral(''); }
      else setGeneral(err.message);
    } finally {
      setBusy(false);
    }
  };
  const other = Object.keys(errors).filter(f => !inputs.includes(f) && f !== 'yaml');
  const training = v.class === 'training';
  return (
    <form ref={formRef} class="submit-job" data-testid="submit-job" onSubmit={submit} novalidate aria-labelledby="submit-title">
      <h2 id="submit-title">{template ? `Resubmit ${template.name} with changes` : 'New job'}</h2>
      <div class="grid">
        <Field id="f-name" label="Name" api="name" errors={errors}>
          {a => <input {...a} type="text" required value={v.name} onInput={set('name')} autocomplete="off" />}
        </Field>
        <Field id="f-class" label="Class" api="class" errors={errors}>
          {a => (
            <select {...a} value={v.class} onChange={set('class')}>
              <option value="training">training</option>
              <option value="inference">inference</option>
              <option value="batch-inference">batch-inference</option>
            </select>
          )}
        </Field>
        <Field id="f-workers" label="Workers" api={['workers', 'replicas']} errors={errors}
          hint={training ? 'Gang members, started together' : 'Sent as replicas'}>
          {a => <input {...a} type="number" min="1" inputMode="numeric" value={v.workers} onInput={set('workers')} />}
        </Field>
        <Field id="f-gpw" label="GPUs per worker" api="gpus_per_worker" errors={errors}>
          {a => <input {...a} type="number" min="0" inputMode="numeric" value={v.gpus_per_worker} onInput={set('gpus_per_worker')} />}
        </Field>
        <Field id="f-mig" label="MIG profile" api="mig_profile" errors={errors} hint="Instead of whole GPUs">
          {a => (
            <select {...a} value={v.mig_profile} onChange={set('mig_profile')}>
              <option value="">none</option>
              {MIG_PROFILES.map(p => <option key={p} value={p}>{p}</option>)}
            </select>
          )}
        </Field>
        <Field id="f-frac" label="GPU fraction" api={['gpu_fraction', 'gpu_milli']} errors={errors} hint="A share of one GPU, e.g. 0.25">
          {a => <input {...a} type="number" min="0" max="1" step="0.01" value={v.gpu_fraction} onInput={set('gpu_fraction')} />}
        </Field>
        <Field id="f-mem" label="Memory (GiB)" api={['memory_gib', 'memory']} errors={errors} hint="Per GPU; or give the model size">
          {a => <input {...a} type="number" min="0" step="any" value={v.memory_gib} onInput={set('memory_gib')} />}
        </Field>
        <Field id="f-params" label="Model size (billion parameters)" api="params_billion" errors={errors}>
          {a => <input {...a} type="number" min="0" step="any" value={v.params_billion} onInput={set('params_billion')} />}
        </Field>
        <Field id="f-prec" label="Precision" api="precision" errors={errors}>
          {a => (
            <select {...a} value={v.precision} onChange={set('precision')}>
              {PRECISIONS.map(p => <option key={p} value={p}>{p}</option>)}
            </select>
          )}
        </Field>
        <Field id="f-prio" label="Priority class" api="priority_class" errors={errors}>
          {a => (
            <select {...a} value={v.priority_class} onChange={set('priority_class')}>
              {classes.map(p => <option key={p} value={p}>{p}</option>)}
            </select>
          )}
        </Field>
        <Field id="f-project" label="Project" api="project" errors={errors}>
          {a => <input {...a} type="text" value={v.project} onInput={set('project')} autocomplete="off" />}
        </Field>
        <Field id="f-ckpt" label="Checkpoint interval (s)" api="checkpoint_interval_s" errors={errors}>
          {a => <input {...a} type="number" min="0" value={v.checkpoint_interval_s} onInput={set('checkpoint_interval_s')} />}
        </Field>
        <Field id="f-dur" label="Duration (s)" api="duration_s" errors={errors} hint="Run time on the simulated executor; empty = until cancelled">
          {a => <input {...a} type="number" min="0" value={v.duration_s} onInput={set('duration_s')} />}
        </Field>
        <Field id="f-image" label="Container image" api="container.image" errors={errors}
          hint="On a Kubernetes cluster: the job's pods run it; empty = no container">
          {a => <input {...a} type="text" value={v.image} onInput={set('image')} autocomplete="off" spellcheck={false} />}
        </Field>
        <Field id="f-command" label="Command" api="container.command" errors={errors} hint="Words separated by spaces; empty = the image's own">
          {a => <input {...a} type="text" value={v.command} onInput={set('command')} autocomplete="off" spellcheck={false} />}
        </Field>
      </div>
      <details>
        <summary>YAML or JSON instead</summary>
        <Field id="f-yaml" label="Workload (one entry, as in examples/workloads)" api="yaml" errors={errors}
          hint="When this box is filled, it is sent instead of the fields above">
          {a => <textarea {...a} rows="8" spellcheck={false} value={yaml} onInput={e => setYaml(e.currentTarget.value)} />}
        </Field>
      </details>
      {other.map(f => <p key={f} class="error" role="alert" id={`error-${f}`} data-testid={`error-${f}`}>{f}: {errors[f]}</p>)}
      {general && <p class="error" role="alert" data-testid="error-general">{general}</p>}
      {Object.keys(errors).length > 0 && <p class="sr-only" role="alert">The server refused the job: {Object.values(errors).join('; ')}</p>}
      <div class="actions">
        <button type="submit" disabled={busy}>Submit</button>
        {onClose && <button type="button" class="secondary" onClick={onClose}>Close</button>}
      </div>
    </form>
  );
}
