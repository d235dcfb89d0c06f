/**
 * What a scoped API key may do: with `readOnly`, only safe methods (GET, HEAD); with
 * `addresses`, only calls about one of those agents (the path's `:address`, or the body's
 * `address` on a route without one). The auth plugin enforces both, for every route.
 */
export interface KeyScope {
  readOnly: boolean;
  /** The agents the key may act on; null for all of the user's agents. */
  addresses: readonly string[] | null;
}

/** Who is calling. Set by the auth plugin before a route's handler runs. */
export type Principal =
  | {
      kind: 'user';
      /** The owner the request acts for: the user, or the team named by `x-team`. */
      userId: string;
      keyId: string;
      /** With `x-team`: the member acting, and the team's slug. */
      team?: { slug: string; actingUserId: string };
      /** When the console session the user called through ends; absent for an API key. */
      sessionExpiresAt?: number;
      /** Present for a scoped API key: what it is limited to. */
      scope?: KeyScope;
    }
  | { kind: 'agent'; address: string; validTo: number }
  | { kind: 'anonymous' };

/**
 * What a route demands:
 * - `user`: a valid API key;
 * - `user-or-agent`: the owning user's key, or an attestation of the agent named by the
 *   route's `:address` parameter;
 * - `agent-body-source`: an attestation of the agent named by the body's `source` field;
 * - `agent`: an attestation of any agent, which the call is then about (its own events);
 * - `agent-token`: a v1 mailroom access token (`Authorization: token …`), which stands for the
 *   agent it was issued to; the call is then about that agent (its own mailbox);
 * - `user-or-any-agent`: a user's key, or an attestation of any agent; the service decides
 *   what that user or agent may do with what the request names (storage assets);
 * - `optional-user`: anyone, but a key given must be valid (it widens what is allowed);
 * - `none`: anyone, credentials are ignored.
 */
export type AuthRequirement =
  | 'user'
  | 'user-or-agent'
  | 'user-or-any-agent'
  | 'agent-body-source'
  | 'agent'
  | 'agent-token'
  | 'optional-user'
  | 'none';
