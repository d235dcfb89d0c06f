import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ActivityPage } from './pages/activity';
import { AgentPage } from './pages/agent';
import { AgentsPage } from './pages/agents';
import { AgentChatPage, ChatSessionsPage } from './pages/chat';
import { HostedPage } from './pages/hosted';
import { HostedAgentPage } from './pages/hosted-agent';
import { KeysPage } from './pages/keys';
import { WebhooksPage } from './pages/webhooks';
import { ProvisionCard } from './pages/provision';
import { NamesPage } from './pages/names';
import { TeamsPage, TeamSwitcher } from './pages/teams';
import { UsagePage } from './pages/usage';
import { FederationPage } from './pages/federation';
import { api, currentTeam, onTeamLost, setCurrentTeam, type Team } from './api';
import { useLoad } from './hooks';
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
  const signedIn = session.state === 'signed-in';
  // The team the pages act for; every page is made anew when it changes.
  const [team, setTeam] = useState(currentTeam());
  const [teamNotice, setTeamNotice] = useState<string | undefined>();
  const teams = useLoad(
    () => (signedIn ? api<Team[]>('GET', '/v2/teams') : Promise.resolve(undefined)),
    [signedIn],
  );
  const switchTeam = (slug: string | undefined) => {
    setCurrentTeam(slug);
    setTeam(slug);
    setTeamNotice(undefined);
  };
  useEffect(() => {
    onTeamLost((reason) => {
      setTeam(undefined);
      setTeamNotice(`Back to your own things: ${reason}`);
      teams.reload();
    });
    return () => onTeamLost(undefined);
  }, []);
  let page;
  if (session.state === 'loading') page = <p>Loading…</p>;
  else if (session.state === 'signed-out') {
    page = <SignIn onSignedIn={auth.signedIn} reason={session.reason} />;
  } else if (route.startsWith('/agents/')) {
    // `/agents/{address}`, `…/activity`, `…/chat` or `…/chat/{session}` (an address has no
    // slash).
    const [address = '', sub, chat] = route.slice('/agents/'.length).split('/');
    const agent = decodeURIComponent(address);
    page =
      sub === 'activity' ? (
        <ActivityPage address={agent} />
      ) : sub === 'chat' ? (
        <AgentChatPage address={agent} {...(chat ? { session: decodeURIComponent(chat) } : {})} />
      ) : (
        <AgentPage address={agent} />
      );
  } else if (route === '/chat') page = <ChatSessionsPage />;
  else if (route.startsWith('/hosted/')) {
    page = <HostedAgentPage address={decodeURIComponent(route.slice('/hosted/'.length))} />;
  } else if (route === '/hosted') page = <HostedPage />;
  else if (route === '/usage') page = <UsagePage />;
  else if (route === '/keys') page = <KeysPage />;
  else if (route === '/webhooks') page = <WebhooksPage />;
  else if (route === '/names') page = <NamesPage />;
  else if (route === '/federation') page = <FederationPage />;
  else if (route === '/teams' || route.startsWith('/teams/')) {
    const slug = route.slice('/teams/'.length) || undefined;
    page = (
      <TeamsPage
        me={session.session.user.name}
        selected={slug && decodeURIComponent(slug)}
        onChanged={() => teams.reload()}
        onSwitch={switchTeam}
      />
    );
  } else {
    page = (
      <>
        <AgentsPage />
        <ProvisionCard />
      </>
    );
  }
  const title =
    session.state !== 'signed-in'
      ? 'Sign in'
      : route.startsWith('/agents/')
        ? route.endsWith('/activity')
          ? 'Agent activity'
          : /\/chat(\/|$)/.test(route)
            ? 'Chat with agent'
            : 'Agent'
        : route === '/chat'
          ? 'Chat'
          : route.startsWith('/hosted/')
            ? 'Hosted agent'
            : route === '/hosted'
              ? 'Hosted agents'
              : route === '/usage'
                ? 'Usage'
                : route === '/keys'
                  ? 'API keys'
                  : route === '/webhooks'
                    ? 'Webhooks'
                    : route === '/names'
                      ? 'Names'
                      : route === '/federation'
                        ? 'Federation'
                        : route.startsWith('/teams')
                          ? 'Teams'
                          : 'Agents';
  useEffect(() => {
    document.title = `${title} · Agentry`;
  }, [title]);
  return (
    <>
      <header>
        <a class="brand" href="#/agents">
          Agentry
        </a>
        {session.state === 'signed-in' && (
          <nav>
            <a href="#/agents">Agents</a>
            <a href="#/hosted">Hosted</a>
            <a href="#/chat">Chat</a>
            <a href="#/names">Names</a>
            <a href="#/usage">Usage</a>
            <a href="#/keys">API keys</a>
            <a href="#/webhooks">Webhooks</a>
            <a href="#/teams">Teams</a>
            <a href="#/federation">Federation</a>
            <a href="/inspect/">Inspector</a>
            <a href="/docs">API docs</a>
            <TeamSwitcher
              user={session.session.user.name}
              teams={teams.value}
              current={team}
              onSwitch={switchTeam}
            />
            <button type="button" class="secondary" onClick={() => auth.signOut()}>
              Sign out
            </button>
          </nav>
        )}
      </header>
      <main key={team ?? ''}>
        {teamNotice && (
          <p class="error" role="alert">
            {teamNotice}
          </p>
        )}
        {page}
      </main>
    </>
  );
}

const root = document.getElementById('app')!;
// The static 'Loading…' placeholder goes; the app takes its place.
root.replaceChildren();
render(<Console />, root);
