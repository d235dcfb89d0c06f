import { call } from '../../test/helpers/http.js';
import type { TestIdentity } from '../../test/helpers/uagent.js';
import type { RunningService } from './server.js';

async function expectOk(
  what: string,
  answer: Promise<{ status: number; text: string; body: any }>,
): Promise<any> {
  const { status, text, body } = await answer;
  if (status !== 200) throw new Error(`${what} answered ${status}: ${text.slice(0, 300)}`);
  return body;
}

/**
 * Registers agents as the uAgents client does on connect, through the service's API and
 * under its first user: challenge, signed proof, then `POST /v2/agents`, which creates the
 * agent's mailbox. A few at a time, as a fleet of agents starting together would.
 */
export async function registerAgents(
  service: RunningService,
  agents: TestIdentity[],
  concurrency = 8,
): Promise<void> {
  const key = service.apiKey;
  let next = 0;
  const registerNext = async (): Promise<void> => {
    while (next < agents.length) {
      const agent = agents[next++]!;
      const { challenge } = await expectOk(
        'identity challenge',
        call(service.url, 'GET', `/v2/identity/${agent.address}/challenge`, { key }),
      );
      await expectOk(
        'identity proof',
        call(service.url, 'POST', '/v2/identity', {
          key,
          body: {
            address: agent.address,
            challenge,
            challenge_response: agent.signChallenge(challenge as string),
          },
        }),
      );
      await expectOk(
        'agent registration',
        call(service.url, 'POST', '/v2/agents', {
          key,
          body: { address: agent.address, name: `bench ${agent.address.slice(-8)}`, url: null },
        }),
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, registerNext));
}
