import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ActivityPage } from './pages/activity';
import { AgentPage } from './pages/agent';
import { AgentsPage } from './pages/agents';
import { KeysPage } from './pages/keys';
import { ProvisionCard } from './pages/provision';
import { NamesPage } from './pages/names';
import { UsagePage } from './pages/usage';
import { SignIn, useSession } from './session';
import './style.css';

/** The page asked for by the URL's fragment, such as `/agents/{address}`; the agents by default. */
function useHashRoute(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return hash.replace(/^#/, '') || '/agents';
}

/** The console: sign-in until there is a session, then the header and the page routed to. */
function Console() {
  const auth = useSession();
  const route = useHashRoute();
  const { session } = auth;
  let page;
  if (session.state === 'loading') page = <p>Loading…</p>;
  else if (session.state === 'signed-out') {
    page = <SignIn onSignedIn={auth.signedIn} reason={session.reason} />;
  } else if (route.startsWith('/agents/')) {
    // `/agents/{address}` or `/agents/{address}/activity` (an address has no slash).
    const [address = '', sub] = route.slice('/agents/'.length).split('/');
    page =
      sub === 'activity' ? (
        <ActivityPage address={decodeURIComponent(address)} />
      ) : (
        <AgentPage address={decodeURIComponent(address)} />
      );
  } else if (route === '/usage') page = <UsagePage />;
  else if (route === '/keys') page = <KeysPage />;
  else if (route === '/names') page = <NamesPage />;
  else {
    page = (
      <>
        <AgentsPage />
        <ProvisionCard />
      </>
    );
  }
  return (
    <>
      <header>
        <a class="brand" href="#/agents">
          Agentry
        </a>
        {session.state === 'signed-in' && (
          <nav>
            <a href="#/agents">Agents</a>
            <a href="#/names">Names</a>
            <a href="#/usage">Usage</a>
            <a href="#/keys">API keys</a>
            <a href="/inspect/">Inspector</a>
            <a href="/docs">API docs</a>
            <span class="user">{session.session.user.name}</span>
            <button type="button" class="secondary" onClick={() => auth.signOut()}>
              Sign out
            </button>
          </nav>
        )}
      </header>
      <main>{page}</main>
    </>
  );
}

const root = document.getElementById('app')!;
// The static 'Loading…' placeholder goes; the app takes its place.
root.replaceChildren();
render(<Console />, root);
