import { NotFoundError, PayloadTooLargeError } from '../../errors.js';
import { checkStorageKey, invalid, UNSTORABLE } from './checks.js';
import { notFound, type HostingCore } from './core.js';
import type { StoragePage } from './model.js';

const STORAGE_PAGE = 100;

/**
 * Hosted agents' storage (what an agent's code keeps in `ctx.storage`): for the agent, through
 * its runner, and for its owner over HTTP, each key and the whole within the policy's bounds.
 */
export class HostedStorage {
  constructor(private readonly core: HostingCore) {}

  // ---- For the agent (its ctx.storage, through its runner) ---------------------------------

  async storageGet(address: string, key: string): Promise<string | undefined> {
    checkStorageKey(key);
    return this.core.store.repos.hosting.storageGet(address, key);
  }

  /**
   * Sets a key, within the agent's bounds (keys, and bytes of keys and values together):
   * past them, 413 saying which. 404 when the agent is gone.
   */
  async storageSet(address: string, key: string, value: string): Promise<void> {
    checkStorageKey(key);
    if (UNSTORABLE.test(value)) {
      throw invalid(
        ['body', 'value'],
        'A stored value may not hold a NUL character or a lone surrogate',
      );
    }
    const { storageKeys, storageBytes } = this.core.policy;
    const adds = Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
    if (adds > storageBytes) {
      throw new PayloadTooLargeError(
        `An agent's storage holds at most ${storageBytes} bytes of keys and values; this one alone is ${adds}`,
      );
    }
    await this.core.store.transaction(async (tx) => {
      if (!(await tx.hosting.lock(address))) throw notFound(address);
      const others = await tx.hosting.storageUsage(address, key);
      if (others.keys >= storageKeys && (await tx.hosting.storageGet(address, key)) === undefined) {
        throw new PayloadTooLargeError(
          `An agent's storage holds at most ${storageKeys} keys; delete some first`,
        );
      }
      if (others.bytes + adds > storageBytes) {
        throw new PayloadTooLargeError(
          `An agent's storage holds at most ${storageBytes} bytes of keys and values; ${others.bytes} are used by other keys, and this one needs ${adds}`,
        );
      }
      await tx.hosting.storageSet({ address, key, value, updated_at: this.core.clock.now() });
    });
  }

  /** Deletes a key; says whether it was there. */
  async storageDelete(address: string, key: string): Promise<boolean> {
    checkStorageKey(key);
    return this.core.store.repos.hosting.storageDelete(address, key);
  }

  /** A page of the agent's storage in key order, after the key `after` when given. */
  async storageList(address: string, after?: string, limit = STORAGE_PAGE): Promise<StoragePage> {
    const items = await this.core.store.repos.hosting.storagePage(address, after, limit + 1);
    const more = items.length > limit;
    const page = more ? items.slice(0, limit) : items;
    return { items: page, next: more ? page[page.length - 1]!.key : null };
  }

  /** Empties the agent's storage; answers how many keys went. */
  storageClear(address: string): Promise<number> {
    return this.core.store.repos.hosting.storageClear(address);
  }

  // ---- For the owner (over HTTP) -----------------------------------------------------------

  async ownerStorageList(
    ownerId: string,
    address: string,
    after: string | undefined,
  ): Promise<StoragePage> {
    await this.core.owned(ownerId, address);
    return this.storageList(address, after);
  }

  async ownerStorageGet(ownerId: string, address: string, key: string): Promise<string> {
    await this.core.owned(ownerId, address);
    const value = await this.storageGet(address, key);
    if (value === undefined) throw new NotFoundError(`No storage key "${key.slice(0, 128)}"`);
    return value;
  }

  async ownerStorageSet(ownerId: string, address: string, key: string, value: string) {
    await this.core.owned(ownerId, address);
    await this.storageSet(address, key, value);
  }

  async ownerStorageDelete(ownerId: string, address: string, key: string): Promise<void> {
    await this.core.owned(ownerId, address);
    if (!(await this.storageDelete(address, key))) {
      throw new NotFoundError(`No storage key "${key.slice(0, 128)}"`);
    }
  }
}
