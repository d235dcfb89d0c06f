import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/logger.js';
import type { AccessEnded } from '../../src/services/access-watch.js';
import { TimelineStreams, type TimelineReads } from '../../src/services/timeline-streams.js';
import type { TimelineRow } from '../../src/store/repositories/activity.js';
import { ManualClock } from '../kit/server.js';

const AGENT = 'agent1streamed';
/** The owner whose registration of AGENT (at 0) the streams follow. */
const OWNER = 'alice';

function row(id: number, at: number, source: TimelineRow['source'] = 'm'): TimelineRow {
  return {
    source,
    id,
    address: AGENT,
    kind: source === 'm' ? 'stored' : 'event.info',
    at,
    peer: null,
    session: null,
    uuid: null,
    size: null,
    status_code: null,
    latency_ms: null,
    category: null,
    message: null,
    detail: null,
    data: null,
  };
}

/** A store of timeline rows the streams read, counting the reads; `fail` fails the next ones. */
class Rows implements TimelineReads {
  rows: TimelineRow[] = [];
  reads = 0;
  fail = 0;
  /** Who owns AGENT now, and since when; undefined: deleted. */
  owner: { userId: string; since: number } | undefined = { userId: OWNER, since: 0 };

  newest(agents: readonly { address: string; from: number }[], limit: number) {
    this.reads += 1;
    if (this.fail > 0) {
      this.fail -= 1;
      return Promise.reject(new Error('the database is away'));
    }
    const found = this.rows
      .filter((r) => agents.some((a) => a.address === r.address && r.at >= a.from))
      .sort((a, b) => a.at - b.at || a.id - b.id)
      .slice(0, limit);
    return Promise.resolve(found);
  }

  timeline(): Promise<TimelineRow[]> {
    return Promise.resolve([]);
  }

  owners(addresses: string[]) {
    const owners = new Map<string, { userId: string; since: number }>();
    if (this.owner && addresses.includes(AGENT)) owners.set(AGENT, this.owner);
    return Promise.resolve(owners);
  }
}

/**
 * Opens a stream of AGENT, from now, on fresh streams over a store of their own; answers what
 * it was sent, and `commitAndHand` to store rows as this process does (committed, then handed).
 */
async function streamed() {
  const clock = new ManualClock();
  const rows = new Rows();
  const streams = new TimelineStreams(rows, clock, createLogger({ level: 'silent' }));
  const sent: string[] = [];
  const ended: (AccessEnded | undefined)[] = [];
  const close = streams.open(
    { address: AGENT, since: 0, owner: OWNER },
    { at: clock.now() - 1, source: 'a', id: 0 },
    { pending: true },
    (r) => sent.push(`${r.source}${r.id}`),
    (why) => {
      ended.push(why);
      close();
    },
  );
  // The stream's first read, of where it starts.
  await sleep(20);
  const commitAndHand = (...stored: TimelineRow[]): void => {
    rows.rows.push(...stored);
    streams.handed(stored.map((r) => ({ row: r, owner: rows.owner?.userId ?? 'nobody' })));
  };
  return { clock, rows, streams, sent, ended, commitAndHand };
}

describe('activity streams of single agents', () => {
  it('send handed rows without a read, once, however often the agent is read after', async () => {
    const { clock, rows, streams, sent, commitAndHand } = await streamed();
    const readsBefore = rows.reads;
    commitAndHand(row(1, clock.now()), row(2, clock.now()));
    assert.deepEqual(sent, ['m1', 'm2']);
    // Settled without a read, a second on.
    await sleep(1100);
    assert.equal(rows.reads, readsBefore);
    streams.wake([AGENT]);
    await sleep(20);
    assert.equal(rows.reads, readsBefore + 1);
    assert.deepEqual(sent, ['m1', 'm2']);
    streams.endAll();
  });

  it('still send a row committed late, around handed rows, when its wake comes', async () => {
    const { clock, rows, streams, sent, commitAndHand } = await streamed();
    clock.advance(10_000);
    commitAndHand(row(5, clock.now()));
    // The places are settled a second later, when a late row dated before the handed one may
    // not have been heard of yet.
    clock.advance(1_000);
    await sleep(1100);
    const late = row(3, clock.now() - 2_500, 'a');
    rows.rows.push(late);
    streams.wake([AGENT]);
    await sleep(20);
    assert.deepEqual(sent, ['m5', 'a3']);
    streams.endAll();
  });

  it('are not settled past what a failed read has yet to send', async () => {
    const { clock, rows, streams, sent, commitAndHand } = await streamed();
    clock.advance(10_000);
    commitAndHand(row(8, clock.now()));
    // Before the places settle, a row is committed and its read fails (tried again a second
    // later); when they are due to settle, far past that row, it has still to be sent.
    await sleep(500);
    const missed = row(7, clock.now(), 'a');
    rows.rows.push(missed);
    rows.fail = 1;
    streams.wake([AGENT]);
    await sleep(20);
    clock.advance(60_000);
    await sleep(1500);
    assert.deepEqual(sent, ['m8', 'a7']);
    streams.endAll();
  });

  it('end, without sending it, when a handed row was stored for a later owner of the agent', async () => {
    const { clock, rows, streams, sent, ended, commitAndHand } = await streamed();
    commitAndHand(row(1, clock.now()));
    // The agent was deleted and registered by Bob in another process, not yet heard of here.
    rows.owner = { userId: 'bob', since: clock.now() + 1 };
    clock.advance(10);
    commitAndHand(row(2, clock.now()));
    assert.deepEqual(sent, ['m1']);
    assert.equal(ended.length, 1);
    assert.equal(ended[0]?.reason, 'agent_deleted');
    streams.endAll();
  });

  it('end, without sending them, when the rows a read found are of a later owner', async () => {
    const { clock, rows, streams, sent, ended } = await streamed();
    rows.owner = { userId: 'bob', since: clock.now() + 1 };
    clock.advance(10);
    rows.rows.push(row(3, clock.now(), 'a'));
    streams.wake([AGENT]);
    await sleep(20);
    assert.deepEqual(sent, []);
    assert.equal(ended[0]?.reason, 'agent_deleted');
    // Deleted and registered again by the same owner: a new registration, so it ends too.
    const again = await streamed();
    again.rows.owner = { userId: OWNER, since: again.clock.now() };
    again.rows.rows.push(row(4, again.clock.now(), 'a'));
    again.streams.wake([AGENT]);
    await sleep(20);
    assert.deepEqual(again.sent, []);
    assert.equal(again.ended[0]?.reason, 'agent_deleted');
    streams.endAll();
    again.streams.endAll();
  });
});
