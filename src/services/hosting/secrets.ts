import { seal } from '../../crypto/index.js';
import { ConflictError, NotFoundError } from '../../errors.js';
import { checkSecretName, invalid } from './checks.js';
import { sealContext, type HostingCore } from './core.js';
import { MAX_SECRET_BYTES, MAX_SECRETS_PER_AGENT, type SecretInfo } from './model.js';

/**
 * Hosted agents' secrets, for their owners: sealed as they are set and never answered (the
 * runner unseals them for the agent's process alone, see runners.ts).
 */
export class HostedSecrets {
  constructor(private readonly core: HostingCore) {}

  /** Sets a secret of the owner's agent (replacing one of the same name); never answers it. */
  async putSecret(
    ownerId: string,
    secret: { address: string; name: string; secret: string },
  ): Promise<SecretInfo> {
    const { address, name } = secret;
    checkSecretName(name, ['body', 'name']);
    if (Buffer.byteLength(secret.secret, 'utf8') > MAX_SECRET_BYTES) {
      throw invalid(['body', 'secret'], `A secret is at most ${MAX_SECRET_BYTES} bytes`);
    }
    const key = this.core.key.get();
    await this.core.owned(ownerId, address);
    const now = this.core.clock.now();
    await this.core.store.transaction(async (tx) => {
      await tx.hosting.lock(address);
      const existing = await tx.hosting.secrets(address);
      if (existing.length >= MAX_SECRETS_PER_AGENT && !existing.some((row) => row.name === name)) {
        throw new ConflictError(
          `An agent has at most ${MAX_SECRETS_PER_AGENT} secrets; delete one first`,
        );
      }
      await tx.hosting.putSecret({
        address,
        name,
        ciphertext: seal(key, secret.secret, sealContext('secret', address, name)),
        created_at: now,
      });
    });
    return { address, name, createdAt: now };
  }

  /** Every secret of the owner's hosted agents. */
  async secrets(ownerId: string): Promise<SecretInfo[]> {
    return (await this.core.store.repos.hosting.secretsOfOwner(ownerId)).map((row) => ({
      address: row.address,
      name: row.name,
      createdAt: Number(row.created_at),
    }));
  }

  async agentSecrets(ownerId: string, address: string): Promise<SecretInfo[]> {
    await this.core.owned(ownerId, address);
    return (await this.core.store.repos.hosting.secrets(address)).map((row) => ({
      address: row.address,
      name: row.name,
      createdAt: Number(row.created_at),
    }));
  }

  async deleteSecret(ownerId: string, address: string, name: string): Promise<void> {
    await this.core.owned(ownerId, address);
    if (!(await this.core.store.repos.hosting.deleteSecret(address, name))) {
      throw new NotFoundError(`Hosted agent ${address} has no secret "${name.slice(0, 128)}"`);
    }
  }
}
