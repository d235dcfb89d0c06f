import { hostname } from 'node:os';
import type { Command } from 'commander';
import type { AppContext } from '../../context.js';
import { AGENT_STATUSES, type AgentStatusName } from '../../wire/activity.js';
import type { FederationStatus } from '../../wire/federation.js';
import { formatTime, isoTime, withJsonOption, withServices, withStoreOptions } from '../common.js';

/** Agents read a page at a time for their statuses. */
const PAGE = 500;
/** How far back "recent failures" look. */
const RECENT_MS = 3600_000;
/** Failures counted at most. */
const COUNTED_FAILURES = 1000;
/** Failures listed one by one, newest first. */
const SHOWN_FAILURES = 5;

/** Whether the service answers its readiness check at `url`, and how. */
async function probe(url: string): Promise<{ url: string; answers: boolean; detail: string }> {
  try {
    const res = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(3000) });
    return { url, answers: res.ok, detail: res.ok ? 'ready' : `not ready (${res.status})` };
  } catch {
    return { url, answers: false, detail: 'does not answer (is "agentry serve" running?)' };
  }
}

/** `url` as another machine reaches it: a loopback address names `host`, the server's machine. */
function onMachine(url: string, host: string): string {
  const parsed = new URL(url);
  if (/^(127\.|\[::1\]$|localhost$)/.test(parsed.hostname)) parsed.hostname = host;
  return parsed.origin;
}

/**
 * Where to ask for the server: `--url` when given; else every server this database says
 * listens (each replica; one on another machine by that machine's name); else the public URL.
 */
async function serverUrls(ctx: AppContext, url: string | undefined): Promise<string[]> {
  if (url !== undefined) return [url.replace(/\/+$/, '')];
  const here = hostname();
  const listening = await ctx.services.servers.listeningServers();
  const urls = listening.map((server) =>
    server.host === here ? server.url : onMachine(server.url, server.host),
  );
  return urls.length > 0 ? [...new Set(urls)] : [ctx.config.publicUrl.replace(/\/+$/, '')];
}

/**
 * The running server's view of its peers and upstreams (their health is what its process saw),
 * asked as the instance itself (`authorization`: signed with the instance key, which only its
 * operator holds); undefined when it does not answer.
 */
async function federationOf(
  url: string,
  authorization: string | undefined,
): Promise<FederationStatus | undefined> {
  if (authorization === undefined) return undefined;
  try {
    const res = await fetch(`${url}/v2/federation/health`, {
      headers: { authorization },
      signal: AbortSignal.timeout(3000),
    });
    return res.ok ? ((await res.json()) as FederationStatus) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How this command asks the server as the instance itself; undefined when the instance key
 * cannot be opened here (no sealing key on PostgreSQL): the rest of the status is still told.
 */
async function instanceAuthorization(ctx: {
  services: { federation: { instanceAuthorization(): Promise<string> } };
}): Promise<string | undefined> {
  try {
    return await ctx.services.federation.instanceAuthorization();
  } catch {
    return undefined;
  }
}

function healthWords(target: {
  healthy: boolean;
  last_ok_at: string | null;
  last_error: string | null;
}): string {
  if (!target.healthy) return `unhealthy: ${target.last_error ?? 'failed'}`;
  return target.last_ok_at === null
    ? 'not asked yet'
    : `healthy (last good answer ${target.last_ok_at})`;
}

/**
 * `agentry status`: a summary of the service: whether it answers (each server on this
 * database, or `--url`), its agents by status, the
 * messages waiting in mailboxes, and the failures of the last hour.
 */
export function addStatusCommand(program: Command): void {
  withStoreOptions(
    withJsonOption(
      program
        .command('status')
        .description(
          'summarise the service: whether it answers, agents by status, pending messages, MCP sessions, recent failures',
        )
        .option(
          '--url <url>',
          'where the server answers (default: where the servers on this database listen, else AGENTRY_PUBLIC_URL)',
        ),
    ),
  ).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      const servers = await Promise.all(
        (await serverUrls(ctx, flags.url as string | undefined)).map(probe),
      );
      const server = servers.find((one) => one.answers) ?? servers[0]!;
      const byStatus = Object.fromEntries(AGENT_STATUSES.map((s) => [s, 0])) as Record<
        AgentStatusName,
        number
      >;
      let agents = 0;
      for (let after = ''; ;) {
        const page = await ctx.services.agents.listAsOperator(undefined, after, PAGE);
        const statuses = await ctx.services.activity.statuses(page.map((agent) => agent.address));
        for (const { status } of statuses.values()) byStatus[status]++;
        agents += page.length;
        if (page.length < PAGE) break;
        after = page[page.length - 1]!.address;
      }
      const pending = await ctx.services.mailbox.pendingTotals();
      const mcp = await ctx.services.mcpSessions.counts();
      const since = ctx.clock.now() - RECENT_MS;
      const failures = await ctx.services.deliveries.failuresAsOperator(since, COUNTED_FAILURES);
      const counts: Record<string, number> = {};
      for (const row of failures) {
        const kind = row.event === 'forwarded' ? 'forward_failed' : row.event;
        counts[kind] = (counts[kind] ?? 0) + 1;
      }
      const federation = server.answers
        ? await federationOf(server.url, await instanceAuthorization(ctx))
        : undefined;
      const published = await ctx.services.federation.publishedCount();
      const summary = {
        server,
        servers,
        database: ctx.config.databaseUrl.startsWith('sqlite:') ? 'sqlite' : 'postgres',
        agents: { total: agents, ...byStatus },
        pending_messages: Number(pending.messages),
        bytes_stored: Number(pending.bytes),
        mcp_sessions: { open: mcp.open, used_last_hour: mcp.lastHour },
        failures_last_hour: { total: failures.length, ...counts },
        recent_failures: failures.slice(0, SHOWN_FAILURES).map((row) => ({
          at: isoTime(Number(row.at)),
          agent: row.address,
          event: row.event === 'forwarded' ? 'forward_failed' : row.event,
          status_code: row.status_code,
          detail: row.detail,
        })),
        federation: {
          address: federation?.address ?? null,
          published_agents: published,
          peers: federation?.peers ?? ctx.config.federation.peers,
          upstreams:
            federation?.upstreams ?? ctx.config.federation.upstreams.map((url) => ({ url })),
          remote_lookups: federation?.remote_lookups ?? [],
        },
      };
      if (!server.answers) process.exitCode = 3;
      if (flags.json) {
        console.log(JSON.stringify(summary));
        return;
      }
      const lines = [
        ...servers.map(
          (one, i) => `${i === 0 ? 'server' : ''}`.padEnd(18) + `${one.url}: ${one.detail}`,
        ),
        `agents            ${agents}${agents > 0 ? ` (${AGENT_STATUSES.map((s) => `${byStatus[s]} ${s}`).join(', ')})` : ''}`,
        `pending messages  ${summary.pending_messages} (${summary.bytes_stored} bytes)`,
        `MCP sessions      ${mcp.open} open (${mcp.lastHour} used in the last hour)`,
        `failures, 1 hour  ${
          failures.length === 0
            ? 'none'
            : `${failures.length}${failures.length === COUNTED_FAILURES ? '+' : ''} (${Object.entries(
                counts,
              )
                .map(([kind, n]) => `${n} ${kind}`)
                .join(', ')})`
        }`,
      ];
      for (const row of failures.slice(0, SHOWN_FAILURES)) {
        lines.push(
          `  ${formatTime(Number(row.at))}  ${row.address}  ${row.event === 'forwarded' ? 'forward_failed' : row.event}${row.status_code === null ? '' : ` ${row.status_code}`}  ${row.detail ?? ''}`.trimEnd(),
        );
      }
      lines.push(
        `federation        ${federation ? `instance ${federation.address}` : server.answers ? 'instance unknown (its key cannot be opened here: set AGENTRY_HOSTING_KEY as the server has it)' : 'instance unknown (the server does not answer)'}; ${published} published agent${published === 1 ? '' : 's'}`,
      );
      if (federation) {
        for (const peer of federation.peers) {
          lines.push(`  peer      ${peer.url}  ${peer.address}  ${healthWords(peer)}`);
        }
        for (const upstream of federation.upstreams) {
          lines.push(`  upstream  ${upstream.url}  ${healthWords(upstream)}`);
        }
        const lookups = federation.remote_lookups;
        lines.push(
          `  from afar ${lookups.length === 0 ? 'no look-ups answered from afar' : `${lookups.length}${lookups.length === 100 ? '+' : ''} look-ups answered from afar, the last ${lookups[0]!.address} from ${lookups[0]!.home}`}`,
        );
      }
      console.log(lines.join('\n'));
    });
  });
}
