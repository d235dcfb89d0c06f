/**
 * What a scoped API key may do: with `readOnly`, only safe methods (GET, HEAD); with
 * `addresses`, only calls about one of those agents, as each route declares what it is about
 * ({@link CallSubject}). The auth plugin enforces both, for every route.
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
      /**
       * For a key a member made while acting for a team (the key's owner is then the team):
       * that member. The key works only while they are a member.
       */
      member?: string;
      /** The console session the user called through (the hash of its token). */
      sessionId?: string;
      /** When the console session the user called through ends; absent for an API key. */
      sessionExpiresAt?: number;
      /** When the key (the request's, or the session's) expires; absent when it never does. */
      keyExpiresAt?: number;
      /** Present for a scoped API key: what it is limited to. */
      scope?: KeyScope;
    }
  | { kind: 'agent'; address: string; validTo: number }
  | { kind: 'anonymous' };

export type UserPrincipal = Extract<Principal, { kind: 'user' }>;

/**
 * The member of a team a user principal stands for, when it acts for a team: the member who
 * sent `x-team`, or who made the team key it calls with. Removing that member ends it.
 */
export function memberOf(principal: UserPrincipal): string | undefined {
  return principal.team?.actingUserId ?? principal.member;
}

/**
 * What a route demands:
 * - `user`: a valid API key;
 * - `user-or-agent`: the owning user's key, or an attestation of the agent the route is about
 *   (its {@link CallSubject});
 * - `agent-body-source`: an attestation of the agent named by the body's `source` field;
 * - `agent`: an attestation of any agent, which the call is then about (its own events);
 * - `agent-token`: a v1 mailroom access token (`Authorization: token …`), which stands for the
 *   agent it was issued to; the call is then about that agent (its own mailbox);
 * - `user-or-any-agent`: a user's key, or an attestation of any agent; the service decides
 *   what that user or agent may do with what the request names (storage assets);
 * - `optional-user`: anyone, but a key given must be valid (it widens what is allowed, so a
 *   scoped key's limits hold);
 * - `none`: anyone, credentials are ignored (a scoped key is answered as anyone is).
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

/**
 * What a call is about, declared by its route beside its `auth` (docs/keys.md):
 * - `{ agent: 'params' | 'body', field }`: one agent, named by that field of the validated
 *   path or body. A key limited to agents may make the call for one of its agents; an
 *   attestation on a `user-or-agent` route must be that agent's.
 * - `'narrower-key'`: it makes an API key: a scoped key may, for a key no broader than itself
 *   (the keys service checks the request against the caller's scope).
 * - `'each-call'`: a protocol endpoint carrying calls of its own (MCP's tools): the route
 *   checks each call against the key's scope with {@link scopeRefusal}, as the plugin checks
 *   a route's.
 * - absent: the caller's things as a whole (lists, keys, names, webhooks, teams, assets…): a
 *   key limited to agents is refused.
 */
export type CallSubject =
  { agent: 'params' | 'body'; field: string } | 'narrower-key' | 'each-call';

/** What a key's scope is checked against: whether the call writes, and which agent it is about. */
export interface ScopedCall {
  writes: boolean;
  /** The agent the call is about; undefined when it is about the caller's things as a whole. */
  about: string | undefined;
}

const READ_ONLY =
  'This API key is read-only: it may only read (GET). Use a key without read_only for this call';

function limitedTo(scope: KeyScope): string {
  const many = (scope.addresses?.length ?? 0) > 1;
  return `This API key is limited to ${many ? `${scope.addresses!.length} agents` : 'one agent'}`;
}

/**
 * Why a key with `scope` may not make `call` (docs/keys.md), in one sentence; undefined when
 * it may. A read-only key reads alone; a key limited to agents makes calls about one of them
 * and no call about the caller's things as a whole.
 */
export function scopeRefusal(scope: KeyScope, call: ScopedCall): string | undefined {
  if (scope.readOnly && call.writes) return READ_ONLY;
  const { addresses } = scope;
  if (addresses === null) return undefined;
  if (call.about === undefined) {
    return `${limitedTo(scope)}, and this call is about no one agent: use a key without addresses for it`;
  }
  if (!addresses.includes(call.about)) {
    return `${limitedTo(scope)}, and this call is not about ${addresses.length > 1 ? 'one of them' : 'it'}: use a key without addresses for it`;
  }
  return undefined;
}

/** The subject of a call about the agent its path's `field` (`address` unless told) names. */
export const agentInPath = (field = 'address'): CallSubject => ({ agent: 'params', field });

/** The subject of a call about the agent its body's `field` (`address` unless told) names. */
export const agentInBody = (field = 'address'): CallSubject => ({ agent: 'body', field });
