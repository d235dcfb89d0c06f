import { makeIdentities } from '../lib/envelopes.js';
import { postsOf, runLoad, type HttpRequest } from '../lib/load.js';
import { throughputMeasure } from '../lib/report.js';
import type { Scenario } from './scenario.js';

/** Agents whose identities are proven over and over (the first proof of each is a warm-up). */
const AGENTS = 64;
const WARMUP_PROOFS = 1_000;
const MEASURED_PROOFS = 8_000;

/**
 * Identity proofs: challenges are fetched and signed before the proofs are timed, so the
 * proof run measures the service alone (challenge lookup and single-use delete, one signature
 * check, the identity claim) and not the client's signing.
 */
export const identityScenario: Scenario = {
  name: 'identity',
  async run({ service, profile, dialect }) {
    const agents = makeIdentities(AGENTS);
    const headers = { authorization: `Bearer ${service.apiKey}` };
    const common = { url: service.url, connections: profile.connections, expectStatus: 200 };
    const challengeRequest = (index: number): HttpRequest => ({
      method: 'GET',
      path: `/v2/identity/${agents[index % AGENTS]!.address}/challenge`,
      headers,
    });

    await runLoad({
      ...common,
      until: { seconds: profile.warmupSeconds },
      request: challengeRequest,
    });
    const challenges: string[] = [];
    const issued = await runLoad({
      ...common,
      until: { requests: WARMUP_PROOFS + MEASURED_PROOFS },
      request: challengeRequest,
      onResponse: (index, body) => {
        challenges[index] = (JSON.parse(body) as { challenge: string }).challenge;
      },
      cpuOfPid: service.pid,
    });

    const proofs = challenges.map((challenge, index) => {
      const agent = agents[index % AGENTS]!;
      return JSON.stringify({
        address: agent.address,
        challenge,
        challenge_response: agent.signChallenge(challenge, { s: index % 2 === 0 ? 'high' : 'low' }),
      });
    });
    const proofRequests = postsOf('/v2/identity', proofs, headers);
    await runLoad({ ...common, until: { requests: WARMUP_PROOFS }, request: proofRequests(0) });
    const proven = await runLoad({
      ...common,
      until: { requests: MEASURED_PROOFS },
      request: proofRequests(WARMUP_PROOFS),
      cpuOfPid: service.pid,
    });

    return [
      throughputMeasure(
        { id: 'identity.challenge', label: 'identity: challenge (GET)', store: dialect },
        issued,
      ),
      throughputMeasure(
        {
          id: 'identity.proof',
          label: 'identity: proof (POST, signed beforehand)',
          store: dialect,
        },
        proven,
      ),
      {
        id: 'identity.pair',
        label: 'identity: challenge + proof pairs',
        store: dialect,
        value: 1 / (1 / issued.requestsPerSecond + 1 / proven.requestsPerSecond),
        unit: 'pairs/s',
        details: { derivedFrom: ['identity.challenge', 'identity.proof'] },
      },
    ];
  },
};
