import { registerAgent } from '../../test/kit/agents.js';
import type { TestIdentity } from '../../test/kit/uagent.js';
import type { RunningService } from './server.js';

/**
 * Registers agents as the uAgents client does on connect, through the service's API and
 * under its first user (challenge, signed proof, then `POST /v2/agents`, which creates the
 * agent's mailbox), a few at a time, as a fleet of agents starting together would.
 */
export async function registerAgents(
  service: RunningService,
  agents: TestIdentity[],
  concurrency = 8,
): Promise<void> {
  let next = 0;
  const registerNext = async (): Promise<void> => {
    while (next < agents.length) {
      await registerAgent(service, service.apiKey, agents[next++]!);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, registerNext));
}
