import { SigningKey, seal, unseal } from '../crypto/index.js';
import type { ChangeConsumer, ChangeOf } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { HostingKey } from '../infra/hosting-key.js';
import { RecentSet } from '../infra/recent-set.js';
import type { Store } from '../store/index.js';
import { CHAT_PROTOCOL_DIGEST } from '../wire/chat.js';
import type { OwnAddressBook } from './almanac.js';
import type { ChatIdentityRow } from '../store/repositories/chat.js';

/** How many addresses found not to be chat identities a process remembers. */
const STRANGERS_KEPT = 50_000;

/**
 * The identities users and teams chat from (docs/chat.md): an agent key Agentry holds, sealed at
 * rest with the server's sealing key, and its address. An identity never changes once made, so
 * the ones found are kept in memory: a chat round trip asks for its identity by address several
 * times (the Almanac look-up of the sender, the reply, the acknowledgement).
 */
export class ChatIdentities implements ChangeConsumer<'team.deleted'>, OwnAddressBook {
  readonly kinds = ['team.deleted'] as const;
  /** Identities found, by address (never changed once made; gone only with their owner). */
  private readonly byAddress = new Map<string, ChatIdentityRow>();
  private readonly byOwner = new Map<string, ChatIdentityRow>();
  /**
   * Addresses found not to be chat identities: an identity's address is a key made with it, so
   * none asked for before can become one.
   */
  private readonly strangers = new RecentSet<string>(STRANGERS_KEPT);
  /** Keys opened, by address. */
  private readonly keys = new Map<string, SigningKey>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly sealing: HostingKey,
  ) {}

  /** The owner's identity, made (and its key sealed) the first time it is asked for. */
  async of(ownerId: string): Promise<ChatIdentityRow> {
    const known = this.byOwner.get(ownerId);
    if (known) return known;
    const { chat } = this.store.repos;
    let found = await chat.findIdentity(ownerId);
    if (!found) {
      const key = SigningKey.generate();
      found = await chat.addIdentity({
        owner_id: ownerId,
        address: key.address,
        key_ciphertext: seal(this.sealing.get(), key.privateKeyHex(), sealContext(key.address)),
        created_at: this.clock.now(),
      });
    }
    return this.remember(found);
  }

  /** The identity at `address`, when it is one. */
  async at(address: string): Promise<ChatIdentityRow | undefined> {
    const known = this.byAddress.get(address);
    if (known) return known;
    if (this.strangers.has(address)) return undefined;
    const found = await this.store.repos.chat.findIdentityByAddress(address);
    if (!found) {
      this.strangers.add(address);
      return undefined;
    }
    return this.remember(found);
  }

  /** A chat identity speaks the chat protocol (and is reached at this service's mailbox). */
  protocolsOf(address: string): string[] | undefined | Promise<string[] | undefined> {
    if (this.byAddress.has(address)) return [CHAT_PROTOCOL_DIGEST];
    if (this.strangers.has(address)) return undefined;
    return this.at(address).then((found) => (found ? [CHAT_PROTOCOL_DIGEST] : undefined));
  }

  /** The identity's signing key, opened once. */
  keyOf(identity: Pick<ChatIdentityRow, 'address' | 'key_ciphertext'>): SigningKey {
    let key = this.keys.get(identity.address);
    if (!key) {
      key = SigningKey.fromHex(
        unseal(this.sealing.get(), identity.key_ciphertext, sealContext(identity.address)),
      );
      this.keys.set(identity.address, key);
    }
    return key;
  }

  /** A deleted team's identity went with it. */
  heard(change: ChangeOf<'team.deleted'>): void {
    const known = this.byOwner.get(change.teamId);
    if (!known) return;
    this.byOwner.delete(change.teamId);
    this.byAddress.delete(known.address);
    this.keys.delete(known.address);
  }

  private remember(row: ChatIdentityRow): ChatIdentityRow {
    this.byOwner.set(row.owner_id, row);
    this.byAddress.set(row.address, row);
    return row;
  }
}

function sealContext(address: string): string {
  return `chat-identity:${address}`;
}
