// One place where the results of actions are announced: a visible role="status" region (read by screen
// readers) that names the job or user acted on and stays until the next action or until dismissed.
import { useEffect, useState } from 'preact/hooks';

let current = null;
const listeners = new Set();

// `text`: the result; `href`/`linkText`: an optional link (e.g. to the submitted job); `error`: a failure;
// `token`: a secret shown once (with a copy button).
export function announce(text, extra = {}) {
  current = { text, ...extra, at: Date.now() };
  for (const l of listeners) l(current);
}
export function dismiss() { announce(null); current = null; for (const l of listeners) l(null); }

export function Announcer() {
  const [msg, setMsg] = useState(current);
  useEffect(() => { listeners.add(setMsg); return () => listeners.delete(setMsg); }, []);
  const [copied, setCopied] = useState(false);
  useEffect(() => setCopied(false), [msg]);
  return (
    <div class={`announce${msg && msg.text ? '' : ' empty'}${msg && msg.error ? ' is-error' : ''}`} role="status" data-testid="announce">
      {msg && msg.text && <>
        <span>{msg.text}</span>
        {msg.href && <> <a href={msg.href}>{msg.linkText || 'Open'}</a></>}
        {msg.token && <> <code class="token" data-testid="new-token">{msg.token}</code>
          <button type="button" class="secondary small" onClick={async () => {
            try { await navigator.clipboard.writeText(msg.token); setCopied(true); } catch (e) { setCopied(false); }
          }}>{copied ? 'Copied' : 'Copy token'}</button></>}
        <button type="button" class="secondary small" aria-label="Dismiss message" onClick={dismiss}>Dismiss</button>
      </>}
    </div>
  );
}
