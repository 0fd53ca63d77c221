import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, leaderLink, setCsrfToken, setFollowerHandler, setSignedOutHandler } from './api.js';
import { SignIn } from './pages/signin.jsx';
import { Jobs } from './pages/jobs.jsx';
import { JobPage } from './pages/job.jsx';
import { Team } from './pages/team.jsx';
import { Cluster } from './pages/cluster.jsx';
import { Chargeback } from './pages/chargeback.jsx';
import { Admin } from './pages/admin.jsx';
import { Announcer } from './announce.jsx';
import './style.css';

const NAV = [['jobs', 'Jobs'], ['team', 'Team'], ['cluster', 'Cluster'], ['chargeback', 'Chargeback'], ['admin', 'Admin']];
// Links a role can use: Admin (users, tokens and quotas) is for admins and team leads only.
export function navFor(me) { return NAV.filter(([id]) => id !== 'admin' || me.role === 'admin' || me.role === 'team-lead'); }
const TITLES = { jobs: 'Jobs', team: 'Team', cluster: 'Cluster', chargeback: 'Chargeback', admin: 'Admin' };

function parseRoute() {
  const parts = (location.hash.replace(/^#\/?/, '') || 'jobs').split('/').map(decodeURIComponent);
  return { page: parts[0] || 'jobs', arg: parts[1] || '' };
}

function useRoute() {
  const [route, setRoute] = useState(parseRoute());
  useEffect(() => {
    const on = () => setRoute(parseRoute());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

// On a follower replica: where the leader is (writes are made there), shown above every page.
function LeaderBanner({ leader }) {
  if (leader === null) return null;
  return (
    <p class="leader-banner" role="alert" data-testid="leader-banner">
      This replica only reads: it follows the leader. {leader
        ? <>Submit, cancel and change jobs in the portal at <a href={leader + '/'}>{leader}</a>.</>
        : <>No leader is known yet; changes are possible once one takes over.</>}
    </p>
  );
}

function Shell({ me, onSignOut }) {
  const route = useRoute();
  const main = useRef(null);
  const [leader, setLeader] = useState(null); // null: this replica leads (or is the only one)
  useEffect(() => {
    setFollowerHandler(url => setLeader(url));
    api('GET', '/api/v1/leader').then(j => {
      if (j && j.role === 'follower') setLeader(leaderLink(j.leader || ''));
    }).catch(() => {});
    return () => setFollowerHandler(() => {});
  }, []);
  useEffect(() => {
    // A title per page; focus moves to the new page's heading so that screen readers announce the page.
    const name = route.page === 'jobs' && route.arg ? `Job ${route.arg}` : TITLES[route.page] || 'Not found';
    document.title = `${name} · Tessera`;
    const h = main.current && main.current.querySelector('h1');
    if (h && document.activeElement && document.activeElement.tagName === 'A') h.focus();
  }, [route.page, route.arg]);
  let page;
  switch (route.page) {
    case 'jobs': page = route.arg ? <JobPage id={route.arg} me={me} /> : <Jobs me={me} />; break;
    case 'team': page = <Team me={me} />; break;
    case 'cluster': page = <Cluster me={me} />; break;
    case 'chargeback': page = <Chargeback me={me} />; break;
    case 'admin': page = <Admin me={me} />; break;
    default: page = <p>No such page. <a href="#/jobs">Back to jobs</a></p>;
  }
  return (
    <>
      <a class="skip" href="#main" onClick={e => { e.preventDefault(); main.current.focus(); }}>Skip to content</a>
      <header class="top">
        <span class="brand" aria-hidden="true">Tessera</span>
        <nav aria-label="Main">
          <ul>
            {navFor(me).map(([id, label]) => (
              <li key={id}><a href={`#/${id}`} aria-current={route.page === id ? 'page' : undefined}>{label}</a></li>
            ))}
          </ul>
        </nav>
        <span class="who">
          <span class="who-name">{me.user}{me.team ? ` · ${me.team}` : ''} · {me.role}</span>
          <button type="button" class="link" onClick={onSignOut}>Sign out</button>
        </span>
      </header>
      <LeaderBanner leader={leader} />
      <Announcer />
      <main id="main" ref={main} tabIndex={-1}>{page}</main>
    </>
  );
}

function App() {
  const [me, setMe] = useState(undefined); // undefined: asking; null: signed out
  const signedIn = s => { setCsrfToken(s.csrf_token || null); setMe(s); };
  const signedOut = () => { setCsrfToken(null); setMe(null); };
  useEffect(() => {
    setSignedOutHandler(signedOut);
    api('GET', '/api/v1/session').then(signedIn, signedOut);
  }, []);
  const signOut = async () => {
    try { await api('DELETE', '/api/v1/session'); } catch (e) { /* the session is gone either way */ }
    signedOut();
  };
  if (me === undefined) return <p class="loading" role="status">Loading…</p>;
  if (me === null) return <SignIn onSignedIn={s => { signedIn(s); location.hash = '#/jobs'; }} />;
  return <Shell me={me} onSignOut={signOut} />;
}

render(<App />, document.getElementById('app'));
