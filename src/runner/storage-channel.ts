import type { Socket } from 'node:net';
import type { HostingService } from '../services/hosting/index.js';

/** A storage request longer than this is refused (the store's own bounds are smaller). */
const MAX_CHANNEL_LINE = 4 * 1024 * 1024;
/** Keys answered for `keys` at most. */
const MAX_KEYS_LISTED = 10_000;

/** What the channel asks of the hosting service: the agent's storage. */
export type StorageHosting = Pick<
  HostingService,
  'storageGet' | 'storageSet' | 'storageDelete' | 'storageList' | 'storageClear'
>;

/** What the bootstrap says of itself on the channel: its code loaded, or failed to. */
export type Notice = { op: string; reason?: unknown };

/** Answers the bootstrap's storage requests on fd 3, in order; hears its notices. */
export class StorageChannel {
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly socket: Socket,
    private readonly address: string,
    private readonly hosting: StorageHosting,
    private readonly notice: (notice: Notice) => void,
  ) {
    let partial = '';
    // The id of a request too long to read, whose rest is skipped up to its newline.
    let skipping: number | null | undefined;
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('data', (chunk: string) => {
      if (skipping !== undefined) {
        const end = chunk.indexOf('\n');
        if (end === -1) return;
        const id = skipping;
        skipping = undefined;
        chunk = chunk.slice(end + 1);
        this.queue = this.queue.then(() => this.refuse(id));
      }
      partial += chunk;
      let newline: number;
      while ((newline = partial.indexOf('\n')) !== -1) {
        const line = partial.slice(0, newline);
        partial = partial.slice(newline + 1);
        this.queue = this.queue.then(() => this.handle(line));
      }
      if (partial.length > MAX_CHANNEL_LINE) {
        // The bootstrap writes the id first: the answer can still name the request.
        const id = /^\{\s*"id"\s*:\s*(\d+)/.exec(partial)?.[1];
        skipping = id === undefined ? null : Number(id);
        partial = '';
      }
    });
  }

  private refuse(id: number | null): Promise<void> {
    this.write({ id, ok: false, error: `a storage request is at most ${MAX_CHANNEL_LINE} bytes` });
    return Promise.resolve();
  }

  private async handle(line: string): Promise<void> {
    let message: { id?: unknown; op?: unknown; key?: unknown; value?: unknown; reason?: unknown };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      return;
    }
    if (typeof message !== 'object' || message === null) return;
    if (message.op === 'ready' || message.op === 'failed') {
      this.notice(message as Notice);
      return;
    }
    const id = message.id;
    try {
      const value = await this.answer(message);
      this.write({ id, ok: true, value });
    } catch (err) {
      this.write({ id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  }

  private async answer(message: {
    op?: unknown;
    key?: unknown;
    value?: unknown;
  }): Promise<unknown> {
    const key = (): string => {
      if (typeof message.key !== 'string') throw new Error('a storage key is a string');
      return message.key;
    };
    switch (message.op) {
      case 'get': {
        const text = await this.hosting.storageGet(this.address, key());
        return text === undefined ? null : parseStored(text);
      }
      case 'has':
        return (await this.hosting.storageGet(this.address, key())) !== undefined;
      case 'set': {
        const text = JSON.stringify(message.value ?? null);
        await this.hosting.storageSet(this.address, key(), text);
        return null;
      }
      case 'delete':
        await this.hosting.storageDelete(this.address, key());
        return null;
      case 'clear':
        await this.hosting.storageClear(this.address);
        return null;
      case 'keys': {
        const keys: string[] = [];
        let after: string | undefined;
        do {
          const page = await this.hosting.storageList(this.address, after);
          keys.push(...page.items.map((item) => item.key));
          after = page.next ?? undefined;
        } while (after !== undefined && keys.length < MAX_KEYS_LISTED);
        return keys;
      }
      default:
        throw new Error(`unknown storage operation: ${String(message.op)}`);
    }
  }

  private write(message: unknown): void {
    if (!this.socket.destroyed) this.socket.write(`${JSON.stringify(message)}\n`);
  }
}

/** A stored value as the agent set it (JSON), or the text itself when it was set as text. */
function parseStored(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
