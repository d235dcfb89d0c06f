import type { Command } from 'commander';
import type { Quotas } from '../../config/index.js';
import { userAddressOf } from '../../crypto/index.js';
import { formatTime, integer, withServices, withStoreOptions } from '../common.js';

/** `agentry users add|list|limits`: the users, and what each may use. */
export function addUsersCommand(program: Command): void {
  const users = program.command('users').description('manage users');

  withStoreOptions(
    users.command('add <name>').description('create a user; prints its API key last'),
  ).action(async (name: string, flags) => {
    await withServices(flags, async (ctx) => {
      const created = await ctx.services.users.createUser(name);
      console.log(
        `created user ${created.user.name} (${created.user.id}), sends as ${userAddressOf(created.user.id)}, key id ${created.keyId}`,
      );
      console.log(created.token);
    });
  });

  withStoreOptions(users.command('list').description('list users')).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      for (const user of await ctx.services.users.listUsers()) {
        console.log(
          `${user.name}\t${user.id}\t${formatTime(user.created_at)}\t${userAddressOf(user.id)}`,
        );
      }
    });
  });

  withStoreOptions(
    users
      .command('limits <user>')
      .description("set a user's quotas (defaults come from AGENTRY_QUOTA_*); prints the limits")
      .option('--agents <n>', 'agents the user may register', integer)
      .option('--messages <n>', 'messages submitted to their agents per month', integer)
      .option('--bytes-stored <n>', 'bytes held in their mailboxes', integer)
      .option(
        '--bytes-transferred <n>',
        'envelope bytes served to their agents per month',
        integer,
      ),
  ).action(async (name: string, flags) => {
    await withServices(flags, async (ctx) => {
      const user = await ctx.services.users.findUser(name);
      const changes: Partial<Quotas> = {
        agents: flags.agents,
        messagesPerMonth: flags.messages,
        bytesStored: flags.bytesStored,
        bytesTransferredPerMonth: flags.bytesTransferred,
      };
      const given = Object.values(changes).some((value) => value !== undefined);
      const limits = given
        ? await ctx.services.usage.setLimits(user.id, changes)
        : await ctx.services.usage.limitsFor(user.id);
      console.log(`agents\t${limits.agents}`);
      console.log(`messages\t${limits.messagesPerMonth}`);
      console.log(`bytes-stored\t${limits.bytesStored}`);
      console.log(`bytes-transferred\t${limits.bytesTransferredPerMonth}`);
    });
  });
}
