import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Store } from '../../src/store/index.js';
import { fullTextSearch } from '../../src/store/probes.js';
import { runLoad, type HttpRequest, type LoadResult } from '../lib/load.js';
import type { Measure } from '../lib/report.js';
import type { Scenario } from './scenario.js';

/** The registry grows from the first size to the second; each is measured. */
const SIZES = [1_000, 100_000] as const;
/** Agents per protocol, and per distinctive word: the same at every size. */
const PER_PROTOCOL = 100;
const PER_WORD = 10;
/** Rows per insert while seeding. */
const BATCH = 500;
/** Searches per measurement, one at a time (after a warm-up), as one client sends them. */
const WARMUP = 1_000;
const SEARCHES = 1_000;
const TARGETS = { protocol: 5, text: 15 };
const HOUR = 3600 * 1000;

function digestOf(group: number): string {
  return createHash('sha256').update(`bench protocol ${group}`).digest('hex');
}

/** Fixed length, so that no word begins another and a prefix search finds 10 listings. */
export function wordOf(group: number): string {
  return `kestrel${group.toString(36).padStart(4, '0')}`;
}

/**
 * Writes agents `from`..`to` straight into the store as registration would have: a registry
 * listing (indexed for full-text search), an Almanac registration declaring one protocol of
 * 100 agents each, and, for every tenth agent, a status update marking it inactive.
 */
export async function seed(store: Store, userId: string, from: number, to: number): Promise<void> {
  const now = Date.now();
  for (let start = from; start < to; start += BATCH) {
    const indices = Array.from({ length: Math.min(BATCH, to - start) }, (_, k) => start + k);
    const rows = indices.map((i) => {
      const address = `agent1bench${i.toString().padStart(8, '0')}`;
      const digest = `proto:${digestOf(Math.floor(i / PER_PROTOCOL))}`;
      const word = wordOf(Math.floor(i / PER_WORD));
      return { i, address, digest, word };
    });
    const profile = (word: string) => ({
      description: `Answers ${word} questions about weather and tides`,
      readme: '',
    });
    await store.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('agents')
        .values(
          rows.map(({ address, digest, word }) => ({
            address,
            user_id: userId,
            name: `Bench ${word}`,
            handle: null,
            redirect_url: null,
            agent_type: 'uagent',
            profile: JSON.stringify({
              ...profile(word),
              avatar_url: '',
              banner_url: '',
              starter_prompts: [],
            }),
            endpoints: '[]',
            protocols: JSON.stringify([digest]),
            metadata: null,
            registered_at: now,
            updated_at: now,
          })),
        )
        .execute();
      await fullTextSearch(store.dialect).indexAgentTexts(
        trx,
        rows.map(({ address, word }) => ({
          address,
          name: `Bench ${word}`,
          handle: '',
          ...profile(word),
        })),
      );
      await trx
        .insertInto('almanac_registrations')
        .values(
          rows.map(({ i, address, digest }) => ({
            address,
            prefix: 'agent',
            endpoints: JSON.stringify([
              { url: `http://127.0.0.1:${8000 + (i % 1000)}/submit`, weight: 1 },
            ]),
            protocols: JSON.stringify([digest]),
            metadata: null,
            signed_at: now,
            signature: 'sig1bench',
            expires_at: now + 48 * HOUR,
            updated_at: now + i,
          })),
        )
        .execute();
      await trx
        .insertInto('almanac_protocols')
        .values(rows.map(({ address, digest }) => ({ digest, address })))
        .execute();
      const inactive = rows.filter(({ i }) => i % 10 === 0);
      if (inactive.length > 0) {
        await trx
          .insertInto('almanac_statuses')
          .values(
            inactive.map(({ address }) => ({
              address,
              is_active: 0,
              signed_at: now,
              signature: 'sig1bench',
              updated_at: now,
            })),
          )
          .execute();
      }
    });
  }
  if (store.dialect === 'postgres') {
    await sql`vacuum analyze`.execute(store.db);
  }
}

function measure(
  id: string,
  label: string,
  dialect: Measure['store'],
  run: LoadResult,
  agents: number,
  targetMs: number,
): Measure {
  return {
    id,
    label,
    store: dialect,
    value: run.latencyMs.p99,
    unit: 'ms p99',
    latencyMs: { p50: run.latencyMs.p50, p99: run.latencyMs.p99 },
    serverCores: run.serverCores,
    details: { agents, searches: run.requests, connections: 1, targetP99Ms: targetMs },
  };
}

/**
 * Almanac search at two registry sizes: `POST /v1/almanac/search` with a protocol digest (what
 * uAgents' broadcast sends; 100 agents declare each protocol, one in ten inactive), and
 * `POST /v1/search/agents` with a word that ten listings carry (full-text relevance), each
 * 1,000 times one after another from one client (after 1,000 to warm up). The registry is written straight into the store, in
 * batches. Targets: p99 under 5 ms and 15 ms, and at 100,000 agents no more than twice the
 * p99 at 1,000.
 */
export const searchScenario: Scenario = {
  name: 'search',
  async run({ service, dialect, store }) {
    const db = store();
    const user = await db.db.selectFrom('users').select('id').executeTakeFirstOrThrow();
    const measures: Measure[] = [];
    let seeded = 0;
    const p99At: Record<string, number[]> = { protocol: [], text: [] };
    for (const size of SIZES) {
      await seed(db, user.id, seeded, size);
      seeded = size;
      const protocols = size / PER_PROTOCOL;
      const words = size / PER_WORD;
      const byProtocolRequest = (index: number): HttpRequest => ({
        method: 'POST',
        path: '/v1/almanac/search',
        body: JSON.stringify({ text: digestOf((index * 7919) % protocols) }),
      });
      const byTextRequest = (index: number): HttpRequest => ({
        method: 'POST',
        path: '/v1/search/agents',
        body: JSON.stringify({ search_text: wordOf((index * 7919) % words), limit: 30 }),
      });
      const sequential = async (request: (index: number) => HttpRequest) => {
        const common = { url: service.url, connections: 1, expectStatus: 200 };
        await runLoad({ ...common, until: { requests: WARMUP }, request });
        return runLoad({
          ...common,
          until: { requests: SEARCHES },
          request: (index) => request(index + WARMUP),
          cpuOfPid: service.pid,
        });
      };
      const byProtocol = await sequential(byProtocolRequest);
      const byText = await sequential(byTextRequest);
      const label = size.toLocaleString('en-US');
      measures.push(
        measure(
          `search.almanac_protocol.${size}`,
          `search: almanac by protocol (broadcast), ${label} agents`,
          dialect,
          byProtocol,
          size,
          TARGETS.protocol,
        ),
        measure(
          `search.text.${size}`,
          `search: full text, ${label} agents`,
          dialect,
          byText,
          size,
          TARGETS.text,
        ),
      );
      p99At.protocol!.push(byProtocol.latencyMs.p99);
      p99At.text!.push(byText.latencyMs.p99);
    }
    for (const kind of ['protocol', 'text'] as const) {
      const [small, large] = p99At[kind]!;
      measures.push({
        id: `search.${kind}.growth`,
        label: `search: ${kind} p99 at 100,000 agents ÷ p99 at 1,000 (target ≤ 2)`,
        store: dialect,
        value: large! / small!,
        unit: '×',
      });
    }
    return measures;
  },
};
