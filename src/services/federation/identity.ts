import { SigningKey, seal, unseal } from '../../crypto/index.js';
import type { Clock } from '../../infra/clock.js';
import type { HostingKey } from '../../infra/hosting-key.js';
import type { Store } from '../../store/index.js';

/** How long an attestation this instance signs for its peers is valid. */
const ATTESTATION_WINDOW_SECONDS = 600;
/** A new attestation is signed once the one in use has less than this left. */
const ATTESTATION_RENEW_SECONDS = 300;

/**
 * This instance's identity (docs/federation.md, "Identity"): an agent key made on first need,
 * sealed at rest with the server's sealing key as the chat identities are, whose address its
 * peers name in AGENTRY_PEERS. Its requests to peers carry `Authorization: Agent <attestation>`,
 * which the peers' auth plugin checks as any agent's.
 */
export class InstanceIdentity {
  private key: SigningKey | undefined;
  private opening: Promise<SigningKey> | undefined;
  private current: { text: string; validTo: number } | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly sealing: HostingKey,
  ) {}

  async address(): Promise<string> {
    return (await this.signingKey()).address;
  }

  /** An `Authorization` header value for a request to a peer; one is reused while it is fresh. */
  async authorization(): Promise<string> {
    const key = await this.signingKey();
    const now = Math.floor(this.clock.now() / 1000);
    if (!this.current || this.current.validTo - now < ATTESTATION_RENEW_SECONDS) {
      // Valid from a little before now: a peer whose clock is behind still takes it.
      const validTo = now + ATTESTATION_WINDOW_SECONDS;
      this.current = { text: key.attestation(now - 30, validTo), validTo };
    }
    return `Agent ${this.current.text}`;
  }

  private signingKey(): Promise<SigningKey> {
    if (this.key) return Promise.resolve(this.key);
    this.opening ??= this.open().then(
      (key) => (this.key = key),
      (err: unknown) => {
        this.opening = undefined;
        throw err;
      },
    );
    return this.opening;
  }

  private async open(): Promise<SigningKey> {
    const { federation } = this.store.repos;
    let row = await federation.findIdentity();
    if (!row) {
      const key = SigningKey.generate();
      row = await federation.addIdentity({
        address: key.address,
        key_ciphertext: seal(this.sealing.get(), key.privateKeyHex(), sealContext(key.address)),
        created_at: this.clock.now(),
      });
    }
    return SigningKey.fromHex(
      unseal(this.sealing.get(), row.key_ciphertext, sealContext(row.address)),
    );
  }
}

function sealContext(address: string): string {
  return `federation-identity:${address}`;
}
