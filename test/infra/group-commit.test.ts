import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GroupCommit, type ItemOutcome } from '../../src/infra/group-commit.js';

/** A writer that records each group it is given and commits when the test says so. */
class RecordingWriter {
  readonly groups: number[][] = [];
  readonly committed: number[] = [];
  private release: (() => void)[] = [];

  /** Refuses items in `refused`; throws for a group that holds `breaking`. */
  constructor(
    private readonly options: { refused?: number[]; breaking?: number; manual?: boolean } = {},
  ) {}

  write = async (items: number[]): Promise<ItemOutcome<string>[]> => {
    this.groups.push(items);
    if (this.options.manual) await new Promise<void>((resolve) => this.release.push(resolve));
    if (this.options.breaking !== undefined && items.includes(this.options.breaking)) {
      throw new Error(`item ${this.options.breaking} broke the transaction`);
    }
    this.committed.push(...items);
    return items.map((item) =>
      this.options.refused?.includes(item)
        ? { ok: false, error: new Error(`item ${item} refused`) }
        : { ok: true, value: `stored ${item}` },
    );
  };

  /** Lets the oldest waiting group commit. */
  commitNext(): void {
    this.release.shift()?.();
  }
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('group commit', () => {
  it('writes items submitted together in one group and answers each with its own outcome', async () => {
    const writer = new RecordingWriter();
    const commits = new GroupCommit(writer.write, 100);
    const answers = await Promise.all([1, 2, 3].map((item) => commits.submit(item)));
    assert.deepEqual(writer.groups, [[1, 2, 3]]);
    assert.deepEqual(answers, ['stored 1', 'stored 2', 'stored 3']);
  });

  it('answers an item only once the group holding it has committed', async () => {
    const writer = new RecordingWriter({ manual: true });
    const commits = new GroupCommit(writer.write, 100);
    const answered: number[] = [];
    const first = commits.submit(1).then(() => answered.push(1));
    await turn();
    // Arrives while the first group is being written: it waits for the next group.
    const second = commits.submit(2).then(() => answered.push(2));
    await turn();
    assert.deepEqual(answered, []);
    writer.commitNext();
    await first;
    assert.deepEqual(writer.committed, [1]);
    assert.deepEqual(answered, [1]);
    await turn();
    assert.deepEqual(writer.groups, [[1], [2]]);
    assert.deepEqual(answered, [1], 'the second item is not answered before its commit');
    writer.commitNext();
    await second;
    assert.deepEqual(answered, [1, 2]);
  });

  it('refuses one item without failing the others of its group', async () => {
    const writer = new RecordingWriter({ refused: [2] });
    const commits = new GroupCommit(writer.write, 100);
    const answers = await Promise.allSettled([1, 2, 3].map((item) => commits.submit(item)));
    assert.deepEqual(writer.groups, [[1, 2, 3]]);
    assert.deepEqual(
      answers.map((answer) => answer.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.match(String((answers[1] as PromiseRejectedResult).reason), /item 2 refused/);
  });

  it('writes each item of a group that failed alone, so only the item at fault fails', async () => {
    const writer = new RecordingWriter({ breaking: 2 });
    const commits = new GroupCommit(writer.write, 100);
    const answers = await Promise.allSettled([1, 2, 3].map((item) => commits.submit(item)));
    assert.deepEqual(writer.groups, [[1, 2, 3], [1], [2], [3]]);
    assert.deepEqual(writer.committed, [1, 3]);
    assert.deepEqual(
      answers.map((answer) => answer.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.match(String((answers[1] as PromiseRejectedResult).reason), /broke the transaction/);
  });

  it('keeps groups within the largest size, in arrival order', async () => {
    const writer = new RecordingWriter();
    const commits = new GroupCommit(writer.write, 2);
    await Promise.all([1, 2, 3, 4, 5].map((item) => commits.submit(item)));
    assert.deepEqual(writer.groups, [[1, 2], [3, 4], [5]]);
  });
});
