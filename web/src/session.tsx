import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, onSessionEnded, type SessionInfo } from './api';
import { messageOf, useAction } from './hooks';

export type SessionState =
  | { state: 'loading' }
  | { state: 'signed-out'; reason?: string }
  | { state: 'signed-in'; session: SessionInfo };

/**
 * The current console session, read once, with ways to change it. A 401 from any later call
 * of the page ends it, with the server's reason shown on the sign-in form.
 */
export function useSession() {
  const [session, setSession] = useState<SessionState>({ state: 'loading' });
  useEffect(() => {
    api<SessionInfo>('GET', '/v2/session').then(
      (s) => setSession({ state: 'signed-in', session: s }),
      () => setSession({ state: 'signed-out' }),
    );
    onSessionEnded((reason) => setSession({ state: 'signed-out', reason }));
    return () => onSessionEnded(undefined);
  }, []);
  return {
    session,
    signedIn: (s: SessionInfo) => setSession({ state: 'signed-in', session: s }),
    signOut: async () => {
      await api('DELETE', '/v2/session').catch(() => undefined);
      setSession({ state: 'signed-out' });
    },
  };
}

/** The session and the ways to change it, as `useSession` gives them. */
export type Auth = ReturnType<typeof useSession>;

/** Sign-in with an API key; the key goes to the server once and is never kept in the page. */
export function SignIn(props: { onSignedIn: (s: SessionInfo) => void; reason?: string }) {
  const [key, setKey] = useState('');
  const signIn = useAction({
    explain: (err) =>
      err instanceof ApiError && err.status === 401
        ? `That API key was refused: ${err.message}`
        : `Sign-in failed: ${messageOf(err)}`,
  });
  const submit = signIn.submit(async () => {
    const session = await api<SessionInfo>('POST', '/v2/session', { api_key: key.trim() });
    setKey('');
    props.onSignedIn(session);
  });
  // Why the last session ended, until the user tries again.
  const error = signIn.busy ? undefined : (signIn.error ?? props.reason);
  return (
    <form class="card signin" onSubmit={submit}>
      <h2>Sign in</h2>
      <p>
        Paste an API key of your Agentry user (printed on first start, or made with{' '}
        <code>agentry keys add USER</code>).
      </p>
      <label>
        API key
        <input
          type="password"
          name="api_key"
          autocomplete="off"
          required
          value={key}
          onInput={(e) => setKey((e.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit" disabled={signIn.busy}>
        Sign in
      </button>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}
