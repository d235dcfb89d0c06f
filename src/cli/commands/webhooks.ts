import { InvalidArgumentError, Option, type Command } from 'commander';
import type { WebhookDeliveryInfo, WebhookInfo } from '../../services/webhooks.js';
import { newWebhookView, webhookDeliveryView, webhookView } from '../../views/webhooks.js';
import { WEBHOOK_DELIVERY_STATUSES, WEBHOOK_KINDS, type WebhookKind } from '../../wire/webhooks.js';
import {
  checkedAgentAddress,
  formatTime,
  positive,
  printRows,
  withJsonOption,
  withServices,
  withStoreOptions,
} from '../common.js';

/** Collects each `--kind` given into a list. */
function addKind(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** The kinds given, each one a hook may choose, at least one. */
function checkedKinds(kinds: string[] | undefined): WebhookKind[] {
  if (kinds === undefined || kinds.length === 0) {
    throw new InvalidArgumentError(
      `give the kinds it is told of with --kind (repeat for more): ${WEBHOOK_KINDS.join(', ')}`,
    );
  }
  for (const kind of kinds) {
    if (!(WEBHOOK_KINDS as readonly string[]).includes(kind)) {
      throw new InvalidArgumentError(
        `${kind} is not a webhook kind; one of ${WEBHOOK_KINDS.join(', ')}`,
      );
    }
  }
  return kinds as WebhookKind[];
}

/** Collects each `--agent` given into a list. */
function addAddress(value: string, previous: string[] = []): string[] {
  return [...previous, checkedAgentAddress(value)];
}

/** An http:// or https:// URL, as a hook's must be. */
function hookUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('not a URL; give an http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError('give an http:// or https:// URL');
  }
  return value;
}

function printHooks(hooks: WebhookInfo[], json: boolean, none: string): void {
  printRows(
    hooks,
    [
      { header: 'id', cell: (h) => h.id },
      { header: 'url', cell: (h) => h.url },
      { header: 'kinds', cell: (h) => h.kinds.join(',') },
      { header: 'agents', cell: (h) => (h.agents === null ? 'all' : h.agents.join(',')) },
      { header: 'created', cell: (h) => formatTime(h.createdAt) },
      { header: 'description', cell: (h) => h.description },
    ],
    { json, none, toJson: webhookView },
  );
}

function printDeliveries(deliveries: WebhookDeliveryInfo[], json: boolean, none: string): void {
  printRows(
    deliveries,
    [
      { header: 'time', cell: (d) => formatTime(d.createdAt) },
      { header: 'id', cell: (d) => d.id },
      { header: 'kind', cell: (d) => d.kind },
      { header: 'status', cell: (d) => d.status },
      { header: 'attempts', cell: (d) => d.attempts },
      { header: 'code', cell: (d) => d.statusCode },
      { header: 'ms', cell: (d) => d.durationMs },
      { header: 'agent', cell: (d) => d.agent },
      { header: 'error', cell: (d) => d.error },
    ],
    { json, none, toJson: webhookDeliveryView },
  );
}

/** `agentry webhooks list|add|remove|test|deliveries|redeliver`: the users' webhooks. */
export function addWebhooksCommand(program: Command): void {
  const webhooks = program
    .command('webhooks')
    .description("manage users' webhooks and see their deliveries (docs/webhooks.md)");

  withStoreOptions(
    withJsonOption(
      webhooks
        .command('list <user>')
        .description("a user's webhooks: id, url, kinds, agents, created, description"),
    ),
  ).action(async (user: string, flags) => {
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      printHooks(
        await ctx.services.webhooks.list(owner.id),
        Boolean(flags.json),
        `no webhooks for ${user}`,
      );
    });
  });

  withStoreOptions(
    withJsonOption(
      webhooks
        .command('add <user> <url>')
        .description('make a webhook for a user; prints its id, then its secret (shown this once)')
        .option(
          '--kind <kind>',
          `a kind it is told of (repeat for more): ${WEBHOOK_KINDS.join(', ')}`,
          addKind,
        )
        .option('--agent <address>', "only this agent of the user's (repeat for more)", addAddress)
        .option('--description <text>', 'what it is for'),
    ),
  ).action(async (user: string, url: string, flags) => {
    hookUrl(url);
    const kinds = checkedKinds(flags.kind as string[] | undefined);
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(user);
      const hook = await ctx.services.webhooks.create(owner.id, {
        url,
        kinds,
        agents: (flags.agent as string[] | undefined) ?? null,
        description: (flags.description as string | undefined) ?? null,
      });
      if (flags.json) {
        console.log(JSON.stringify(newWebhookView(hook)));
        return;
      }
      console.log(`webhook ${hook.id} for ${user}: ${hook.kinds.join(',')} to ${hook.url}`);
      console.log(hook.secret);
    });
  });

  withStoreOptions(
    webhooks.command('remove <id>').description('delete a webhook and its deliveries'),
  ).action(async (id: string, flags) => {
    await withServices(flags, async (ctx) => {
      const { webhooks: service } = ctx.services;
      await service.remove(await service.ownerOf(id), id);
      console.log(`removed ${id}`);
    });
  });

  withStoreOptions(
    withJsonOption(
      webhooks
        .command('test <id>')
        .description('send a webhook.test delivery now and show how its first attempt went'),
    ),
  ).action(async (id: string, flags) => {
    await withServices(flags, async (ctx) => {
      const { webhooks: service } = ctx.services;
      const delivery = await service.test(await service.ownerOf(id), id);
      printDeliveries([delivery], Boolean(flags.json), '');
    });
  });

  withStoreOptions(
    withJsonOption(
      webhooks
        .command('deliveries <id>')
        .description(
          "a webhook's recent deliveries, newest first (time, id, kind, status, attempts, code, ms, agent, error); --json adds what each sent and was answered",
        )
        .addOption(
          new Option('--status <status>', 'only deliveries in this state').choices(
            WEBHOOK_DELIVERY_STATUSES,
          ),
        )
        .option('--limit <n>', 'most deliveries shown (default 100)', positive),
    ),
  ).action(async (id: string, flags) => {
    await withServices(flags, async (ctx) => {
      const { webhooks: service } = ctx.services;
      const rows = await service.deliveries(await service.ownerOf(id), id, {
        ...(flags.status
          ? { status: flags.status as (typeof WEBHOOK_DELIVERY_STATUSES)[number] }
          : {}),
        limit: Math.min((flags.limit as number | undefined) ?? 100, 500),
        offset: 0,
      });
      printDeliveries(rows, Boolean(flags.json), `no deliveries for ${id}`);
    });
  });

  withStoreOptions(
    withJsonOption(
      webhooks
        .command('redeliver <id> <delivery>')
        .description("send a delivery's event again now, as a new delivery, and show how it went"),
    ),
  ).action(async (id: string, delivery: string, flags) => {
    await withServices(flags, async (ctx) => {
      const { webhooks: service } = ctx.services;
      const sent = await service.redeliver(await service.ownerOf(id), id, delivery);
      printDeliveries([sent], Boolean(flags.json), '');
    });
  });
}
