import type { Command } from 'commander';
import type { Quotas } from '../../config/index.js';
import { userAddressOf } from '../../crypto/index.js';
import {
  formatTime,
  integer,
  isoTime,
  printRows,
  withJsonOption,
  withServices,
  withStoreOptions,
} from '../common.js';

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

  withStoreOptions(
    withJsonOption(users.command('list').description('list users: name, id, created, address')),
  ).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      printRows(
        await ctx.services.users.listUsers(),
        [
          { header: 'name', cell: (u) => u.name },
          { header: 'id', cell: (u) => u.id },
          { header: 'created', cell: (u) => formatTime(u.created_at) },
          { header: 'address', cell: (u) => userAddressOf(u.id) },
        ],
        {
          json: Boolean(flags.json),
          none: 'no users',
          toJson: (u) => ({
            name: u.name,
            id: u.id,
            created: isoTime(u.created_at),
            address: userAddressOf(u.id),
          }),
        },
      );
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
