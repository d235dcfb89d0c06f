import assert from 'node:assert/strict';
import { almanacSigningBytes } from '../../src/crypto/index.js';
import type {
  AgentRegistrationAttestation,
  AgentStatusUpdate,
  AlmanacMetadata,
} from '../../src/wire/almanac.js';
import type { Endpoint } from '../../src/wire/common.js';
import { call, type JsonResponse } from './http.js';
import type { SHalf, TestIdentity } from './uagent.js';

export type NetworkPrefix = 'agent' | 'test-agent';

/** `int(time.time())`, the timestamp uAgents signs, of a moment in milliseconds. */
export function unixSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/** `prefix://address` as uAgents writes `agent.identifier`; a bare address when prefix is null. */
export function agentIdentifier(identity: TestIdentity, prefix: NetworkPrefix | null): string {
  return prefix === null ? identity.address : `${prefix}://${identity.address}`;
}

export interface RegistrationOptions {
  /** Signing time in unix seconds. */
  timestamp: number;
  /** Network of the identifier (uAgents: `agent` on mainnet, `test-agent` on testnet). */
  prefix?: NetworkPrefix | null;
  endpoints?: Endpoint[];
  protocols?: string[];
  metadata?: AlmanacMetadata | null;
  s?: SHalf;
  /** The key that signs, when a test forges another agent's registration. */
  signedBy?: TestIdentity;
}

/**
 * An `AgentRegistrationAttestation` as uAgents posts it: the model's fields in its order,
 * `metadata` null when there is none, signed over Python's JSON of all but the signature.
 */
export function signedRegistration(
  identity: TestIdentity,
  options: RegistrationOptions,
): AgentRegistrationAttestation {
  const fields = {
    agent_identifier: agentIdentifier(
      identity,
      options.prefix === undefined ? 'agent' : options.prefix,
    ),
    timestamp: options.timestamp,
    protocols: options.protocols ?? [],
    endpoints: options.endpoints ?? [{ url: 'http://127.0.0.1:8001/submit', weight: 1 }],
    metadata: options.metadata ?? null,
  };
  const signer = options.signedBy ?? identity;
  const signature = signer.sign(almanacSigningBytes(fields), { s: options.s });
  return {
    agent_identifier: fields.agent_identifier,
    signature,
    timestamp: fields.timestamp,
    protocols: fields.protocols,
    endpoints: fields.endpoints,
    metadata: fields.metadata,
  };
}

export interface StatusOptions {
  active: boolean;
  timestamp: number;
  prefix?: NetworkPrefix | null;
}

/** An `AgentStatusUpdate` as uAgents posts it at start-up and shutdown. */
export function signedStatusUpdate(
  identity: TestIdentity,
  options: StatusOptions,
): AgentStatusUpdate {
  const fields = {
    agent_identifier: agentIdentifier(
      identity,
      options.prefix === undefined ? 'agent' : options.prefix,
    ),
    timestamp: options.timestamp,
    is_active: options.active,
  };
  return {
    agent_identifier: fields.agent_identifier,
    signature: identity.sign(almanacSigningBytes(fields)),
    timestamp: fields.timestamp,
    is_active: fields.is_active,
  };
}

export function postRegistration(baseUrl: string, body: unknown): Promise<JsonResponse<any>> {
  return call(baseUrl, 'POST', '/v1/almanac/agents', { body });
}

export function postStatus(
  baseUrl: string,
  address: string,
  body: unknown,
): Promise<JsonResponse<any>> {
  return call(baseUrl, 'POST', `/v1/almanac/agents/${address}/status`, { body });
}

/** `GET /v1/almanac/agents/{address}` as the uAgents resolver sends it. */
export function resolveAgent(
  baseUrl: string,
  address: string,
  prefix?: NetworkPrefix,
): Promise<JsonResponse<any>> {
  const query = prefix === undefined ? '' : `?prefix=${prefix}`;
  return call(baseUrl, 'GET', `/v1/almanac/agents/${address}${query}`);
}

/** The uagents-core CLI's `resolve`: 200 with an AlmanacRegistration, 404 "available". */
export function cliResolve(baseUrl: string, id: string): Promise<JsonResponse<any>> {
  return call(baseUrl, 'GET', `/v2/almanac/resolve/${id}`);
}

/** Registers the agent's endpoints and fails the test unless the service took them. */
export async function registerInAlmanac(
  baseUrl: string,
  identity: TestIdentity,
  options: RegistrationOptions,
): Promise<AgentRegistrationAttestation> {
  const body = signedRegistration(identity, options);
  const res = await postRegistration(baseUrl, body);
  assert.equal(res.status, 200, res.text);
  return body;
}
