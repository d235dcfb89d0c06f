import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, Nullable, Timestamp } from './common.js';

/** The shortest and longest time between two probes of an agent. */
export const MIN_PROBE_INTERVAL_SECONDS = 5;
export const MAX_PROBE_INTERVAL_SECONDS = 86_400;
/** The window of probes a success rate is measured over. */
export const HEALTH_RATE_WINDOW_MS = 24 * 3600 * 1000;

export const ProbesParams = Type.Object({ address: AgentAddress });

export const ProbesRequest = Type.Object({
  interval_seconds: Type.Integer({
    minimum: MIN_PROBE_INTERVAL_SECONDS,
    maximum: MAX_PROBE_INTERVAL_SECONDS,
    description: 'How often Agentry probes the agent, in seconds',
  }),
});
export type ProbesRequest = Static<typeof ProbesRequest>;

export const AgentProbes = Type.Object({
  address: Type.String(),
  enabled: Type.Boolean({ description: 'whether its owner asked for probes' }),
  interval_seconds: Nullable(Type.Integer()),
  healthy: Nullable(
    Type.Boolean({
      description:
        'true: it answers probes; false: it stopped answering; null: not probed, or not known yet',
    }),
  ),
  unanswered: Type.Integer({ description: 'probes not answered in a row' }),
  waiting: Type.Boolean({ description: 'a probe was sent and waits for its answer' }),
  last_probe_at: Nullable(Timestamp),
  last_answered_at: Nullable(Timestamp),
  last_latency_ms: Nullable(
    Type.Integer({ description: 'from the last answered probe to its acknowledgement' }),
  ),
  last_failure: Nullable(Type.String({ description: 'why the last unanswered probe was' })),
  next_probe_at: Nullable(Timestamp),
  success_rate: Nullable(
    Type.Number({
      description: 'the share of the probes of the last 24 hours it answered (0 to 1); null: none',
    }),
  ),
});
export type AgentProbes = Static<typeof AgentProbes>;
