import { InvalidArgumentError, type Command } from 'commander';
import { MAX_KEY_ADDRESSES } from '../../wire/keys.js';
import {
  checkedAgentAddress,
  duration,
  formatTime,
  withServices,
  withStoreOptions,
} from '../common.js';

/** Collects each `--agent` given into a list. */
function addAddress(value: string, previous: string[] = []): string[] {
  return [...previous, checkedAgentAddress(value)];
}

/** How a key's scope reads in a list: `full`, `read-only`, `agents:N`, or both. */
function scopeText(key: { readOnly: boolean; addresses: string[] | null }): string {
  const parts = [];
  if (key.readOnly) parts.push('read-only');
  if (key.addresses) parts.push(`agents:${key.addresses.join(',')}`);
  return parts.length ? parts.join(' ') : 'full';
}

/** `agentry keys add|list|revoke`: the users' API keys. */
export function addKeysCommand(program: Command): void {
  const keys = program.command('keys').description('manage API keys');

  withStoreOptions(
    keys
      .command('add <user>')
      .description('create an API key for a user; prints it last')
      .option('--expires <duration>', 'lifetime such as 30d, 12h, 2w', duration)
      .option('--read-only', 'the key may only read (GET)')
      .option(
        '--agent <address>',
        `limit the key to this agent (repeat for more, up to ${MAX_KEY_ADDRESSES})`,
        addAddress,
      ),
  ).action(async (user: string, flags) => {
    const addresses = flags.agent as string[] | undefined;
    if (addresses && addresses.length > MAX_KEY_ADDRESSES) {
      throw new InvalidArgumentError(`a key may be limited to ${MAX_KEY_ADDRESSES} agents at most`);
    }
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      const key = await ctx.services.keys.createKey(owner.id, {
        lifetimeMs: flags.expires,
        readOnly: Boolean(flags.readOnly),
        addresses: addresses ?? null,
      });
      console.log(
        `key id ${key.id}, expires ${formatTime(key.expiresAt)}, scope ${scopeText(key)}`,
      );
      console.log(key.token);
    });
  });

  withStoreOptions(keys.command('list <user>').description("list a user's keys")).action(
    async (user: string, flags) => {
      await withServices(flags, async (ctx) => {
        console.log('id\tcreated\texpires\trevoked\tscope');
        for (const key of await ctx.services.keys.listKeys(user)) {
          console.log(
            `${key.id}\t${formatTime(key.createdAt)}\t${formatTime(key.expiresAt)}\t${formatTime(key.revokedAt)}\t${scopeText(key)}`,
          );
        }
      });
    },
  );

  withStoreOptions(keys.command('revoke <keyId>').description('revoke an API key')).action(
    async (keyId: string, flags) => {
      await withServices(flags, async (ctx) => {
        await ctx.services.keys.revokeKey(keyId);
        console.log(`revoked ${keyId}`);
      });
    },
  );
}
