import assert from 'node:assert/strict';
import { createServer, type Server as HttpServer } from 'node:http';
import {
  createNodeVerifier,
  verifyEnvelopeSignature,
  type EnvelopeFields,
} from '../../src/crypto/index.js';
import type { AlmanacAgent } from '../../src/wire/almanac.js';
import { resolveAgent } from './almanac.js';
import { call, type JsonResponse } from './http.js';
import type { TestIdentity } from './uagent.js';

/** What the uAgents client does with the service's answers when it sends: resolve, then post. */

const verifier = createNodeVerifier();

/** `DEFAULT_MAX_ENDPOINTS` of the resolver. */
const MAX_RESOLVED_ENDPOINTS = 10;

/** `AgentverseConfig.mailbox_endpoint`: the endpoint `mailbox=True` registers, weight 1. */
export function mailboxEndpointOf(agentverse: string): string {
  return `${agentverse}/v2/agents/mailbox/submit`;
}

/**
 * Weighted sampling without replacement (Efraimidis–Spirakis), as uAgents' resolver orders
 * the endpoints it hands to the dispenser, which tries them first to last.
 */
export function weightedRandomSample<T>(items: T[], weights: number[], k: number): T[] {
  const keys = weights.map((weight) => Math.random() ** (1 / weight));
  const order = items.map((_, index) => index).sort((x, y) => keys[x]! - keys[y]!);
  return order.slice(-k).map((index) => items[index]!);
}

/**
 * `AlmanacApiResolver._api_resolve`: a record counts only with a 200 and an expiry, and
 * yields its endpoint URLs sampled by weight.
 */
export async function resolveEndpoints(
  agentverse: string,
  address: string,
): Promise<{ record: AlmanacAgent; endpoints: string[] }> {
  const res = await resolveAgent(agentverse, address);
  assert.equal(res.status, 200, res.text);
  const record = res.body as AlmanacAgent;
  assert.notEqual(record.expiry, null, 'the resolver drops a record without expiry');
  assert.ok(record.endpoints.length > 0, 'the resolver finds nowhere to send without endpoints');
  const endpoints = weightedRandomSample(
    record.endpoints.map(({ url }) => url),
    record.endpoints.map(({ weight }) => weight),
    Math.min(MAX_RESOLVED_ENDPOINTS, record.endpoints.length),
  );
  return { record, endpoints };
}

/**
 * `send_exchange_envelope` without sync: POSTs the envelope's JSON to each endpoint in turn
 * and stops at the first 200. Fails the test when none took it.
 */
export async function dispense(
  envelope: EnvelopeFields,
  endpoints: string[],
): Promise<JsonResponse> {
  const errors: string[] = [];
  for (const endpoint of endpoints) {
    const response = await call(endpoint, 'POST', '', { body: envelope });
    if (response.status === 200) return response;
    errors.push(`${endpoint}: ${response.status} ${response.text}`);
  }
  assert.fail(`Failed to deliver message to ${envelope.target}: ${errors.join('; ')}`);
}

/**
 * An endpoint agent's own server, answering `POST /submit` as uAgents' ASGI server does:
 * it takes only JSON envelopes signed by their sender and addressed to this agent.
 */
export function endpointAgentServer(agent: TestIdentity, inbox: EnvelopeFields[]): HttpServer {
  return createServer((request, response) => {
    const answer = (status: number, body: unknown) =>
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (request.method !== 'POST' || request.url !== '/submit') {
      answer(404, { error: 'not found' });
      return;
    }
    if (!(request.headers['content-type'] ?? '').includes('application/json')) {
      answer(400, { error: 'invalid content-type' });
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      let envelope: EnvelopeFields;
      try {
        envelope = JSON.parse(Buffer.concat(chunks).toString('utf8')) as EnvelopeFields;
      } catch {
        answer(400, { error: 'empty or invalid payload' });
        return;
      }
      if (!verifyEnvelopeSignature(verifier, envelope)) {
        answer(400, { error: 'signature verification failed' });
        return;
      }
      if (envelope.target !== agent.address) {
        answer(400, { error: 'unable to route envelope' });
        return;
      }
      inbox.push(envelope);
      answer(200, {});
    });
  });
}
