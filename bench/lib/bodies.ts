import { signedRegistration } from '../../test/kit/almanac.js';
import { TestIdentity } from '../../test/kit/uagent.js';
import { signedEnvelopes } from './envelopes.js';

/**
 * Request bodies that need a signature each, described by data alone so that worker threads
 * can make any slice of them (see {@link signInWorkers}).
 */
export type BodyJob =
  | {
      kind: 'envelopes';
      /** Seeds of the sending agents' keys (`TestIdentity.fromSeed`). */
      senderSeeds: string[];
      targets: string[];
      /** About how long each envelope's JSON is. */
      bytes: number;
    }
  | {
      kind: 'registrations';
      /** Registration i is signed by the agent of seed `${seedPrefix} ${i}`: a new agent each. */
      seedPrefix: string;
      /** Unix seconds every registration is signed at. */
      timestamp: number;
      protocols: string[];
      endpoint: string;
    };

/** Bodies `from` (inclusive) to `to` (exclusive) of `job`; the same index gives the same request. */
export function makeBodies(job: BodyJob, from: number, to: number): string[] {
  if (job.kind === 'envelopes') {
    const senders = job.senderSeeds.map((seed) => TestIdentity.fromSeed(seed));
    return signedEnvelopes(to - from, {
      senders,
      targets: job.targets,
      bytes: job.bytes,
      firstIndex: from,
    }).bodies;
  }
  const bodies: string[] = [];
  for (let i = from; i < to; i++) {
    const agent = TestIdentity.fromSeed(`${job.seedPrefix} ${i}`);
    const registration = signedRegistration(agent, {
      timestamp: job.timestamp,
      protocols: job.protocols,
      endpoints: [{ url: job.endpoint, weight: 1 }],
      s: i % 2 === 0 ? 'high' : 'low',
    });
    bodies.push(JSON.stringify(registration));
  }
  return bodies;
}
