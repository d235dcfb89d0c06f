import { InvalidArgumentError, type Command } from 'commander';
import { MAX_KEY_ADDRESSES } from '../../wire/keys.js';
import {
  checkedAgentAddress,
  duration,
  formatTime,
  isoTime,
  printRows,
  withJsonOption,
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

  withStoreOptions(
    withJsonOption(
      keys
        .command('list <user>')
        .description("list a user's keys: id, created, expires, revoked, scope"),
    ),
  ).action(async (user: string, flags) => {
    await withServices(flags, async (ctx) => {
      printRows(
        await ctx.services.keys.listKeys(user),
        [
          { header: 'id', cell: (k) => k.id },
          { header: 'created', cell: (k) => formatTime(k.createdAt) },
          { header: 'expires', cell: (k) => formatTime(k.expiresAt) },
          { header: 'revoked', cell: (k) => formatTime(k.revokedAt) },
          { header: 'scope', cell: (k) => scopeText(k) },
        ],
        {
          json: Boolean(flags.json),
          none: `no keys for ${user}`,
          toJson: (k) => ({
            id: k.id,
            label: k.label,
            created: isoTime(k.createdAt),
            expires: isoTime(k.expiresAt),
            revoked: isoTime(k.revokedAt),
            read_only: k.readOnly,
            addresses: k.addresses,
          }),
        },
      );
    });
  });

  withStoreOptions(keys.command('revoke <keyId>').description('revoke an API key')).action(
    async (keyId: string, flags) => {
      await withServices(flags, async (ctx) => {
        await ctx.services.keys.revokeKey(keyId);
        console.log(`revoked ${keyId}`);
      });
    },
  );
}
