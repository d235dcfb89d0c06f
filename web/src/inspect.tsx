import { render } from 'preact';
import { linkParams } from './local-agent';
import { Inspector } from './pages/inspector';
import { useSession } from './session';
import './style.css';

/** The link names an agent on another machine: nothing is asked of it, nothing minted. */
function NotLocal(props: { remote: string }) {
  return (
    <div class="card">
      <h2>Not a local agent</h2>
      <p class="error" role="alert">
        The inspector connects agents running on this computer only ({props.remote} is not 127.0.0.1
        or localhost). Open the link on the machine where the agent runs, or use{' '}
        <code>agentry connect</code> there.
      </p>
    </div>
  );
}

/** The link names no agent: a form for its local URL and address. */
function NoAgent() {
  return (
    <div class="card">
      <h2>Which agent?</h2>
      <p>
        Open the inspector link your agent prints when it starts (
        <code>Agent inspector available at …</code>), or give its local address here.
      </p>
      <form method="get" action="/inspect/">
        <label>
          Agent URL
          <input name="uri" placeholder="http://127.0.0.1:8001" required />
        </label>
        <label>
          Agent address
          <input name="address" placeholder="agent1q…" required />
        </label>
        <button type="submit">Inspect</button>
      </form>
    </div>
  );
}

/** The inspector: the agent its link names, or why there is none to inspect. */
function Page() {
  const auth = useSession();
  const { uri, remote, address } = linkParams();
  let body;
  if (remote) body = <NotLocal remote={remote} />;
  else if (!uri || !address) body = <NoAgent />;
  else body = <Inspector uri={uri} address={address} auth={auth} />;
  return (
    <>
      <header>
        <a class="brand" href="/">
          Agentry
        </a>
        <span>Agent inspector</span>
      </header>
      <main>{body}</main>
    </>
  );
}

const root = document.getElementById('app')!;
// The static 'Loading…' placeholder goes; the app takes its place.
root.replaceChildren();
render(<Page />, root);
