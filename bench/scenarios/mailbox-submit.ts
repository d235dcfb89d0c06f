import { registerAgents } from '../lib/agents.js';
import { seededIdentities } from '../lib/envelopes.js';
import { postsOf, runLoad } from '../lib/load.js';
import { throughputMeasure } from '../lib/report.js';
import { signInWorkers } from '../lib/signing.js';
import type { TestIdentity } from '../../test/kit/uagent.js';
import type { Scenario } from './scenario.js';

const SENDERS = 64;
const TARGETS = 100;
const WARMUP_SUBMITS = 4_000;
const MEASURED_SUBMITS = 24_000;
/**
 * The second run's connections: enough in flight that a store whose commit waits on a disk
 * flush (PostgreSQL) has work for every flush, as a busy service does.
 */
const SATURATING_CONNECTIONS = 64;

export interface SubmitWorkload {
  targets: TestIdentity[];
  bodies: string[];
}

let workload: Promise<SubmitWorkload> | undefined;

/**
 * Made on first use and shared by every store (and by other scenarios that put the same load
 * beside something else): signing costs more than a run. Each store's database is fresh, so
 * every body is new to it; a scenario sends each at most once.
 */
export function submitWorkload(): Promise<SubmitWorkload> {
  workload ??= (async () => {
    const targets = seededIdentities('bench submit target', TARGETS);
    const bodies = await signInWorkers(
      {
        kind: 'envelopes',
        senderSeeds: Array.from({ length: SENDERS }, (_, i) => `bench submit sender ${i}`),
        targets: targets.map((agent) => agent.address),
        bytes: 600,
      },
      WARMUP_SUBMITS + 2 * MEASURED_SUBMITS,
    );
    return { targets, bodies };
  })();
  return workload;
}

/**
 * Mailbox submit: distinct, validly signed ~600-byte envelopes from 64 senders to 100 agents
 * registered through the API, each submitted once. Every 200 is a committed message, so the
 * run pays one HTTP request, one signature check and one durable insert per request: it is
 * compared with the submit ceiling composed from those parts. It runs with the connections
 * every scenario uses, then with {@link SATURATING_CONNECTIONS}.
 */
export const mailboxSubmitScenario: Scenario = submitScenario('mailbox submit', '', '');

/**
 * The same runs with the delivery trace off, right after the runs with it on (the default):
 * what the trace costs a submit, measured in one run.
 */
export const mailboxSubmitUntracedScenario: Scenario = submitScenario(
  'mailbox submit, delivery trace off',
  '.untraced',
  ', delivery trace off',
  { AGENTRY_DELIVERY_TRACE: 'false' },
);

function submitScenario(
  name: string,
  idSuffix: string,
  labelSuffix: string,
  settings?: Record<string, string>,
): Scenario {
  return {
    name,
    ...(settings ? { settings } : {}),
    async run({ service, profile, dialect, ceilings }) {
      const { targets, bodies } = await submitWorkload();
      await registerAgents(service, targets);
      const common = { url: service.url, connections: profile.connections, expectStatus: 200 };
      const submitOf = postsOf('/v2/agents/mailbox/submit', bodies);
      await runLoad({ ...common, until: { requests: WARMUP_SUBMITS }, request: submitOf(0) });
      const ceiling = ceilings.submit[dialect]!;
      const measured = async (id: string, label: string, offset: number, connections: number) => {
        const run = await runLoad({
          ...common,
          connections,
          until: { requests: MEASURED_SUBMITS },
          request: submitOf(offset),
          cpuOfPid: service.pid,
        });
        const measure = throughputMeasure({ id, label, store: dialect }, run, ceiling);
        // The load generator and the server share the cores; per core of the server's own CPU
        // time, the ceiling is what one core does of each part.
        const perServerCore = run.requestsPerSecond / run.serverCores!;
        const ceilingPerCore = ceiling.value / (ceiling.details!.cores as number);
        measure.details = {
          ...measure.details,
          connections,
          perServerCore,
          ceilingPerCore,
          perCoreRatio: perServerCore / ceilingPerCore,
        };
        return measure;
      };
      return [
        await measured(
          `mailbox.submit${idSuffix}`,
          `mailbox: submit (signed 600 B envelope)${labelSuffix}`,
          WARMUP_SUBMITS,
          profile.connections,
        ),
        await measured(
          `mailbox.submit.saturated${idSuffix}`,
          `mailbox: submit, ${SATURATING_CONNECTIONS} connections${labelSuffix}`,
          WARMUP_SUBMITS + MEASURED_SUBMITS,
          SATURATING_CONNECTIONS,
        ),
      ];
    },
  };
}
