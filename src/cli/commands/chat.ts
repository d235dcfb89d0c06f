import { setTimeout as sleep } from 'node:timers/promises';
import type { Command } from 'commander';
import { InvalidArgumentError, Option } from 'commander';
import { loadConfig } from '../../config/index.js';
import { ReplyReader } from '../../services/chat-reply.js';
import {
  CHAT_ENTRY_KINDS,
  type ChatEntry,
  type ChatSession,
  type SendChatAnswer,
} from '../../wire/chat.js';
import { canonicalAgentAddress } from '../../wire/formats.js';
import { positive } from '../common.js';
import { CommandError, EXIT_NO_AGENT, EXIT_NO_SERVER, EXIT_USAGE, UsageError } from '../errors.js';
import { ServerApi } from '../server-api.js';

/** The variable that holds the user API key when `--key` is not given. */
const KEY_VARIABLE = 'AGENTRY_API_KEY';
/** How long to wait before opening a stream again that broke. */
const RESUME_MS = 1000;

function sessionId(value: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(value)) {
    throw new InvalidArgumentError(`not a session id: ${value}`);
  }
  return value.toLowerCase();
}

interface ChatFlags {
  url?: string;
  key?: string;
  team?: string;
  session?: string;
  timeout: number;
  follow?: boolean;
  json?: boolean;
}

/**
 * `agentry chat`: says something to an agent through a running Agentry, as a person does in
 * the console (the chat API, with a user API key), and prints what the agent answers.
 */
export function addChatCommand(program: Command): void {
  program
    .command('chat')
    .description('say something to an agent through a running Agentry and print its reply')
    .usage('[options] AGENT TEXT | --session ID [AGENT] TEXT')
    .argument('[agent]', 'the agent: its address, a name it holds (alice.agent) or its handle')
    .argument('[text]', 'what to say')
    .option('--url <url>', 'where the server answers (default: AGENTRY_PUBLIC_URL)')
    .addOption(new Option('--key <key>', "a user's API key").env(KEY_VARIABLE))
    .option('--team <slug>', "chat as this team of the key's user (x-team)")
    .option('--session <id>', 'continue this session instead of opening one', sessionId)
    .option('--timeout <seconds>', 'how long to wait for a word from the agent', positive, 30)
    .option('--follow', 'after the reply, keep printing what the agent sends until Ctrl-C')
    .option('--json', 'print each entry of the session (both ways) as one JSON object a line')
    .addHelpText(
      'after',
      `
Prints the agent's reply on stdout (a streamed reply as its chunks arrive) and the session id
on stderr; continue the conversation with --session ID. Exit codes: 0 replied, 2 something
to correct (no key or a refused one, an unknown agent, an ended session), 3 the server does
not answer, 4 the message did not reach the agent or it did not answer within --timeout,
1 any other failure.`,
    )
    .action(async (first: string | undefined, second: string | undefined, flags: ChatFlags) => {
      const withSession = flags.session !== undefined;
      const [agent, text] =
        withSession && second === undefined ? [undefined, first] : [first, second];
      if (agent === undefined && !withSession) {
        throw new UsageError('name the agent and what to say to it: agentry chat AGENT TEXT');
      }
      if (text === undefined || text.trim() === '') {
        throw new UsageError(
          `give what to say to the agent: agentry chat ${withSession ? '--session ID' : 'AGENT'} TEXT`,
        );
      }
      // Commander reads the variable; set and empty is none.
      const key = flags.key || undefined;
      if (key === undefined) {
        throw new UsageError(
          `give a user's API key with --key or ${KEY_VARIABLE} ("agentry users add" and "agentry keys add" print one)`,
        );
      }
      const url = flags.url ?? loadConfig({ logLevel: 'warn' }).publicUrl;
      if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url)) {
        throw new UsageError(`not an http(s) URL: ${url} (give the server's address with --url)`);
      }
      const api = new ServerApi({ url, key, team: flags.team });
      await new Conversation(api, flags).run(agent, text);
    });
}

/** What one run of `agentry chat` says and hears. */
class Conversation {
  /** A line of a streamed reply was started and not ended. */
  private lineOpen = false;
  private replied = false;

  constructor(
    private readonly api: ServerApi,
    private readonly flags: ChatFlags,
  ) {}

  private write(line: string): void {
    process.stdout.write(line);
  }

  private endLine(): void {
    if (this.lineOpen) this.write('\n');
    this.lineOpen = false;
  }

  async run(agent: string | undefined, text: string): Promise<void> {
    const session = await this.session(agent);
    if (!this.flags.json) {
      console.error(
        `session ${session.id} with ${session.agent} (continue it with --session ${session.id})`,
      );
    }
    const sent = await this.api.call<SendChatAnswer>(
      `cannot send to ${session.agent}`,
      'POST',
      `/v2/chat/sessions/${session.id}/messages`,
      { text },
    );
    if (this.flags.json) {
      this.write(`${JSON.stringify(sent.message)}\n`);
      if (sent.failure) this.write(`${JSON.stringify(sent.failure)}\n`);
    }
    if (sent.failure) {
      throw new CommandError(
        `the message did not reach ${session.agent}: ${sent.failure.detail ?? 'no reason given'}`,
        EXIT_NO_AGENT,
      );
    }
    await this.listen(session, sent.message);
  }

  /** The session continued (`--session`) or opened with `agent`. */
  private async session(agent: string | undefined): Promise<ChatSession> {
    const id = this.flags.session;
    if (id === undefined) {
      return this.api.call<ChatSession>(
        `cannot open a session with ${agent}`,
        'POST',
        '/v2/chat/sessions',
        { agent },
      );
    }
    const session = await this.api.call<ChatSession>(
      `cannot continue session ${id}`,
      'GET',
      `/v2/chat/sessions/${id}`,
    );
    const address = agent === undefined ? undefined : canonicalAgentAddress(agent);
    if (address !== undefined && address !== session.agent) {
      throw new UsageError(`session ${id} is with ${session.agent}, not ${address}`);
    }
    if (session.ended_at !== null) {
      throw new UsageError(
        `session ${id} ended at ${session.ended_at}: leave out --session to open another`,
      );
    }
    return session;
  }

  /**
   * Follows the session's stream after the message sent, printing what comes, until the reply
   * is complete (or, with --follow, until Ctrl-C or SIGTERM). A stream that breaks is opened
   * again after the last entry seen; no word from the agent for --timeout seconds ends the
   * wait (not with --follow once it replied).
   */
  private async listen(session: ChatSession, message: ChatEntry): Promise<void> {
    const controller = new AbortController();
    const { signal } = controller;
    let stopped = false;
    let timedOut = false;
    let lostServer: CommandError | undefined;
    let timer: NodeJS.Timeout | undefined;
    const wait = (): void => {
      clearTimeout(timer);
      if (this.flags.follow && this.replied) return;
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, this.flags.timeout * 1000);
    };
    const stop = (): void => {
      stopped = true;
      controller.abort();
    };
    if (this.flags.follow) {
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    }
    wait();
    const reader = new ReplyReader(message.msg_id ?? '');
    let last = message.id;
    const path = `/v2/chat/sessions/${session.id}/stream`;
    const doing = `cannot follow session ${session.id}`;
    try {
      for (let done = false; !done && !signal.aborted;) {
        try {
          for await (const event of this.api.stream(doing, path, last, signal)) {
            lostServer = undefined;
            if (event.event === 'end') {
              const { detail } = JSON.parse(event.data) as { detail?: string };
              throw new CommandError(
                `the server ended the session's stream: ${detail ?? 'no reason given'}`,
                EXIT_USAGE,
              );
            }
            if (!(CHAT_ENTRY_KINDS as readonly string[]).includes(event.event)) continue;
            const entry = JSON.parse(event.data) as ChatEntry;
            last = event.id ?? entry.id;
            done = this.take(session, reader, entry);
            // Each word from the agent starts the wait again (none once it replied, following).
            if (entry.direction === 'in') wait();
            if (done) break;
          }
        } catch (err) {
          // Once a stream was open, a server that stops answering is waited for.
          if (!(err instanceof CommandError) || err.exitCode !== EXIT_NO_SERVER) throw err;
          if (lostServer === undefined) {
            console.error(`agentry: ${err.message}; trying again`);
          }
          lostServer = err;
        }
        if (!done) await sleep(RESUME_MS, undefined, { signal }).catch(() => {});
      }
    } finally {
      clearTimeout(timer);
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      if (!this.flags.json) this.endLine();
    }
    if (stopped || !timedOut) return;
    if (lostServer !== undefined) throw lostServer;
    const seconds = `${this.flags.timeout} second${this.flags.timeout === 1 ? '' : 's'}`;
    throw new CommandError(
      reader.outcome === 'streaming'
        ? `the streamed reply of ${session.agent} stopped: nothing more came for ${seconds}`
        : `no reply from ${session.agent} within ${seconds}${reader.acknowledged ? ' (it acknowledged the message)' : ''}`,
      EXIT_NO_AGENT,
    );
  }

  /** Prints an entry of the session; answers whether the wait is over. */
  private take(session: ChatSession, reader: ReplyReader, entry: ChatEntry): boolean {
    const json = this.flags.json === true;
    if (json) this.write(`${JSON.stringify(entry)}\n`);
    const pieces = reader.take(entry);
    if (reader.outcome === 'failed') {
      throw new CommandError(
        `the message did not reach ${session.agent}: ${reader.failure}`,
        EXIT_NO_AGENT,
      );
    }
    if (entry.kind === 'failure') {
      // A message sent in the session from elsewhere (the console) that did not arrive.
      if (!json)
        console.error(`agentry: a message did not reach ${session.agent}: ${entry.detail}`);
      return false;
    }
    let line = '';
    let ended = false;
    for (const piece of pieces) {
      switch (piece.kind) {
        case 'text':
          if (!piece.streamed) line += piece.text;
          else if (!json) {
            this.write(piece.text);
            this.lineOpen = this.lineOpen || piece.text !== '';
          }
          break;
        case 'file':
          line += `${line === '' || line.endsWith('\n') ? '' : '\n'}[file: ${piece.uri}]\n`;
          break;
        case 'stream-end':
          if (!json) this.endLine();
          break;
        case 'session-end':
          ended = true;
          break;
      }
    }
    if (!json && line !== '') {
      this.endLine();
      this.write(line.endsWith('\n') ? line : `${line}\n`);
    }
    if (reader.outcome === 'replied') this.replied = true;
    if (ended) {
      if (!json) this.endLine();
      if (!json) console.error(`${session.agent} ended the session`);
      if (!this.replied && !this.flags.follow) {
        throw new CommandError(
          `${session.agent} ended the session without replying`,
          EXIT_NO_AGENT,
        );
      }
      return true;
    }
    return this.replied && !this.flags.follow;
  }
}
