import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { ServiceUnavailableError } from '../errors.js';

/** Where the hosting key comes from (docs/hosting.md, "The hosting key"). */
export type HostingKeySource =
  /** AGENTRY_HOSTING_KEY, 64 hex digits. */
  | { kind: 'setting'; hex: string }
  /** A file beside the SQLite database, made with a new key the first time one is needed. */
  | { kind: 'file'; path: string }
  /** A database that lives in memory: a key that lives as long as it does. */
  | { kind: 'ephemeral' }
  /** PostgreSQL without the setting: replicas share no file, so nothing is sealed. */
  | { kind: 'missing' };

const KEY_TEXT = /^[0-9a-f]{64}$/;

/**
 * The key that seals hosted agents' seeds and secrets. It is read (or made) when first needed,
 * or at the start of a server that runs hosted agents, so that a server that hosts nothing
 * never writes a key file; without one, sealing answers 503 with the sentence that says what to
 * set.
 */
export class HostingKey {
  private key: Buffer | undefined;
  /** The key file this process made, if it made one. */
  private madeFile: string | undefined;

  constructor(private readonly source: HostingKeySource) {}

  /** Whether this deployment has a key (set, kept beside the database, or in memory). */
  get available(): boolean {
    return this.source.kind !== 'missing';
  }

  /** The 32-byte key; ServiceUnavailableError when this deployment has none. */
  get(): Buffer {
    this.key ??= this.load();
    return this.key;
  }

  /**
   * Reads the key now, making its file if there is none (as a first start makes the first
   * user); answers the file's path when this call made it.
   */
  prepare(): string | undefined {
    if (!this.available || this.key !== undefined) return undefined;
    this.get();
    return this.madeFile;
  }

  private load(): Buffer {
    switch (this.source.kind) {
      case 'setting':
        return Buffer.from(this.source.hex, 'hex');
      case 'ephemeral':
        return randomBytes(32);
      case 'missing':
        throw new ServiceUnavailableError(
          'Agentry needs a key to seal the agent keys it holds (hosted agents’ seeds and secrets, chat identities): the operator sets AGENTRY_HOSTING_KEY (64 hexadecimal digits, the same on every replica; "openssl rand -hex 32" makes one)',
        );
      case 'file': {
        const { key, made } = readOrMakeKeyFile(this.source.path);
        if (made) this.madeFile = this.source.path;
        return key;
      }
    }
  }
}

/**
 * Reads the key file, or makes it with a new key, readable by its owner alone. Of two
 * processes making it at once, one writes it (`wx`) and the other reads what it wrote.
 */
function readOrMakeKeyFile(path: string): { key: Buffer; made: boolean } {
  const hex = randomBytes(32).toString('hex');
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      writeSync(fd, `${hex}\n`);
    } finally {
      closeSync(fd);
    }
    return { key: Buffer.from(hex, 'hex'), made: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  let text = readFileSync(path, 'utf8').trim();
  // A file just made by another process may not hold its key yet.
  for (let tries = 0; text === '' && tries < 50; tries++) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    text = readFileSync(path, 'utf8').trim();
  }
  if (!KEY_TEXT.test(text)) {
    throw new ServiceUnavailableError(
      'The hosting key file beside the database (<database>.hosting-key) does not hold a key (64 hexadecimal digits): the operator restores it from a backup, or sets AGENTRY_HOSTING_KEY',
    );
  }
  if ((statSync(path).mode & 0o077) !== 0) {
    throw new ServiceUnavailableError(
      'The hosting key file beside the database (<database>.hosting-key) may be read by others than its owner: the operator makes it private (chmod 600)',
    );
  }
  return { key: Buffer.from(text, 'hex'), made: false };
}
