import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';

// Exchanges a token for a session cookie; the token itself stays only in this form's field.
export function SignIn({ onSignedIn }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const field = useRef(null);
  useEffect(() => { if (field.current) field.current.focus(); }, []);
  const submit = async e => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const s = await api('POST', '/api/v1/session', { token: token.trim() });
      setToken('');
      onSignedIn(s);
    } catch (err) {
      setError(err.status === 401 ? 'That token is not valid.' : err.message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin" id="main">
      <h1>Tessera</h1>
      <p>Sign in with your API token (shown once when your user was created; <code>tessera</code> uses the same token).</p>
      <form onSubmit={submit} novalidate>
        <label for="token">Token</label>
        <input id="token" ref={field} name="token" type="password" autocomplete="off" required
          value={token} onInput={e => setToken(e.currentTarget.value)}
          aria-describedby={error ? 'signin-error' : undefined} aria-invalid={error ? 'true' : undefined} />
        <button type="submit" disabled={busy}>Sign in</button>
        {error && <p id="signin-error" class="error" role="alert">{error}</p>}
      </form>
    </main>
  );
}
