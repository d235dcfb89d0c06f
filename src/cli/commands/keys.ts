import type { Command } from 'commander';
import { duration, formatTime, withServices, withStoreOptions } from '../common.js';

/** `agentry keys add|list|revoke`: the users' API keys. */
export function addKeysCommand(program: Command): void {
  const keys = program.command('keys').description('manage API keys');

  withStoreOptions(
    keys
      .command('add <user>')
      .description('create an API key for a user; prints it last')
      .option('--expires <duration>', 'lifetime such as 30d, 12h, 2w', duration),
  ).action(async (user: string, flags) => {
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      const key = await ctx.services.keys.createKey(owner.id, { lifetimeMs: flags.expires });
      console.log(`key id ${key.id}, expires ${formatTime(key.expiresAt)}`);
      console.log(key.token);
    });
  });

  withStoreOptions(keys.command('list <user>').description("list a user's keys")).action(
    async (user: string, flags) => {
      await withServices(flags, async (ctx) => {
        console.log('id\tcreated\texpires\trevoked');
        for (const key of await ctx.services.keys.listKeys(user)) {
          console.log(
            `${key.id}\t${formatTime(key.createdAt)}\t${formatTime(key.expiresAt)}\t${formatTime(key.revokedAt)}`,
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
