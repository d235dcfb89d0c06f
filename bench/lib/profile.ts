import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Reading the CPU profiles that `npm run bench -- --cpu-prof` has each server write: where
 * the main thread's time went, by stage of a request (HTTP, routing and validation, auth,
 * the service's own code, query building, SQL statements, serialisation, the MCP and A2A
 * SDKs, garbage collection), and on SQLite which statements took it, so that a change can be
 * told where it costs.
 */

interface CallFrame {
  functionName: string;
  url: string;
  /** Zero-based, as are the columns. */
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

/** The `.cpuprofile` format Node writes (the Chrome DevTools protocol's Profile). */
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Stages in the order they are tried on the path of a frame's source (its script, or the file
 * that script's source map says the code came from); the first that matches names the frame. A
 * frame with no URL (native code, such as a SQLite statement's `all`) belongs to the stage of
 * the frame that called it.
 */
const STAGES: [stage: string, pattern: RegExp][] = [
  [
    'sql statements',
    // With the statement probe loaded, a statement's native time counts under its wrapper.
    /kysely\/dist\/esm\/dialect\/(sqlite|postgres)\/|better-sqlite3|node_modules\/pg|bench\/lib\/statement-hook/,
  ],
  ['query building', /node_modules\/kysely\//],
  ['validation', /node_modules\/ajv|\/wire\/check|plugins\/validation|\/wire\/formats|json-depth/],
  ['auth and signatures', /\/auth\/|\/crypto\/|plugins\/auth|verifier|secp256k1/],
  ['rate limits', /rate-limit/],
  ['logging', /node_modules\/(pino|thread-stream|sonic-boom)/],
  // The MCP endpoint's SDK: its server and transport, the Web Request adapter, its schemas.
  ['mcp sdk', /node_modules\/(@modelcontextprotocol|@hono|zod)\//],
  // The A2A endpoints' SDK: its transport and request handlers, result manager and task store.
  ['a2a sdk', /node_modules\/@a2a-js\//],
  [
    'fastify',
    /node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|fast-json-stringify|secure-json-parse|fast-querystring)/,
  ],
  // The service's modules (tsc's output, or the sources the one-file build maps back to), in
  // this checkout or in a compare's (under node_modules/.cache), and not in a package.
  ['agentry', /^(?!.*\/node_modules\/(?!\.cache\/)).*\/(dist|src)\/(?!cli\/)/],
  [
    'node http and sockets',
    /^node:(_http|http|net|stream|internal\/(streams|http|net|stream_base))/,
  ],
  ['node other', /^node:/],
];

const SPECIAL: Record<string, string> = {
  '(garbage collector)': 'garbage collection',
  '(idle)': 'idle',
  '(program)': 'program (V8, native)',
  '(root)': 'program (V8, native)',
};

/** Where a frame's code was written: a file path (or `node:` name) and a one-based line. */
interface Origin {
  path: string;
  line: number;
}

/**
 * Finds the source of the frames of bundled scripts. The server runs as one file (the modules
 * of the service and of its packages joined, dist/agentry.js), so a frame's script says
 * nothing of its stage; the bundle's source map says which module each position came from.
 */
class Origins {
  private readonly maps = new Map<string, { map: SourceMap; dir: string } | null>();
  private readonly found = new Map<string, Origin>();

  of(frame: CallFrame): Origin {
    const key = `${frame.url}:${frame.lineNumber}:${frame.columnNumber}`;
    let origin = this.found.get(key);
    if (!origin) {
      origin = this.lookUp(frame);
      this.found.set(key, origin);
    }
    return origin;
  }

  private lookUp(frame: CallFrame): Origin {
    const path = frame.url.startsWith('file://') ? fileURLToPath(frame.url) : frame.url;
    const bundle = this.mapOf(path);
    const entry = bundle?.map.findEntry(frame.lineNumber, frame.columnNumber);
    // Node answers an empty object for a position the map does not cover.
    if (bundle && entry && 'originalSource' in entry) {
      return { path: resolve(bundle.dir, entry.originalSource), line: entry.originalLine + 1 };
    }
    return { path, line: frame.lineNumber + 1 };
  }

  private mapOf(path: string): { map: SourceMap; dir: string } | null {
    let loaded = this.maps.get(path);
    if (loaded === undefined) {
      const file = `${path}.map`;
      loaded =
        path.startsWith('/') && existsSync(file)
          ? { map: new SourceMap(JSON.parse(readFileSync(file, 'utf8'))), dir: dirname(path) }
          : null;
      this.maps.set(path, loaded);
    }
    return loaded;
  }
}

function stageOfFrame(frame: CallFrame, origin: Origin): string | undefined {
  if (SPECIAL[frame.functionName]) return SPECIAL[frame.functionName];
  if (!frame.url) return undefined;
  if (frame.functionName === 'stringify' || frame.functionName === 'parse') return undefined;
  return STAGES.find(([, pattern]) => pattern.test(origin.path))?.[0] ?? 'other';
}

/** A source's path as the summary names it: within its package, or from the service's root. */
function shortPath(path: string): string {
  const inPackage = /\/node_modules\/(?!\.cache\/)(.*)$/.exec(path);
  if (inPackage) return inPackage[1]!;
  return /^.*?\/((?:src|dist)\/.*)$/.exec(path)?.[1] ?? path;
}

export interface ProfileSummary {
  /** Milliseconds of samples, idle excluded. */
  busyMs: number;
  idleMs: number;
  /** Busy milliseconds by stage, largest first. */
  stages: { stage: string; ms: number; share: number }[];
  /** The functions that ran themselves longest, with their stage. */
  topFunctions: { name: string; stage: string; ms: number; share: number }[];
}

/** Adds up one or more profiles (the files of one server's run). */
export function summarizeProfiles(paths: string[], top = 15): ProfileSummary {
  const byStage = new Map<string, number>();
  const byFunction = new Map<string, { stage: string; ms: number }>();
  const origins = new Origins();
  let idleMs = 0;
  for (const path of paths) {
    const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
    const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes) {
      for (const child of node.children ?? []) parent.set(child, node.id);
    }
    const stageCache = new Map<number, string>();
    const stageOf = (id: number): string => {
      const cached = stageCache.get(id);
      if (cached) return cached;
      const node = nodes.get(id)!;
      const own = stageOfFrame(node.callFrame, origins.of(node.callFrame));
      const up = parent.get(id);
      const stage = own ?? (up === undefined ? 'program (V8, native)' : stageOf(up));
      stageCache.set(id, stage);
      return stage;
    };
    profile.samples.forEach((id, i) => {
      const ms = (profile.timeDeltas[i] ?? 0) / 1000;
      const stage = stageOf(id);
      if (stage === 'idle') {
        idleMs += ms;
        return;
      }
      byStage.set(stage, (byStage.get(stage) ?? 0) + ms);
      const frame = nodes.get(id)!.callFrame;
      const origin = origins.of(frame);
      const name = `${frame.functionName || '(anonymous)'} ${shortPath(origin.path)}:${origin.line}`;
      const entry = byFunction.get(name) ?? { stage, ms: 0 };
      entry.ms += ms;
      byFunction.set(name, entry);
    });
  }
  const busyMs = [...byStage.values()].reduce((a, b) => a + b, 0);
  return {
    busyMs,
    idleMs,
    stages: [...byStage]
      .map(([stage, ms]) => ({ stage, ms, share: ms / busyMs }))
      .sort((a, b) => b.ms - a.ms),
    topFunctions: [...byFunction]
      .map(([name, { stage, ms }]) => ({ name, stage, ms, share: ms / busyMs }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top),
  };
}

/**
 * The main thread's profiles in `dir` (Node names them CPU.date.time.pid.thread.seq, the main
 * thread being thread 0): where requests are parsed, routed, checked, stored and answered.
 * Worker threads (signature checks, SQLite checkpoints) write their own files beside them.
 */
export function mainThreadProfiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => /\.\d+\.0\.\d+\.cpuprofile$/.test(name))
    .map((name) => join(dir, name));
}

/**
 * The arguments that have a server profile itself into `dir`: Node's CPU profile of each
 * thread, and the statement probe's totals (bench/lib/statement-probe.mjs).
 */
export function profilingArgs(dir: string): string[] {
  const probe = new URL('./statement-probe.mjs', import.meta.url).href;
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', probe];
}

/** One statement shape's time on the event loop, over every server of a profile's directory. */
export interface StatementTotal {
  shape: string;
  runs: number;
  ms: number;
}

/** The statement probe's totals in `dir`, most time first. */
export function statementTotals(dir: string): StatementTotal[] {
  const totals = new Map<string, StatementTotal>();
  for (const name of readdirSync(dir).filter((file) => /^statements\.\d+\.json$/.test(file))) {
    const noted = JSON.parse(readFileSync(join(dir, name), 'utf8')) as [string, [number, number]][];
    for (const [shape, [runs, ms]] of noted) {
      const total = totals.get(shape) ?? { shape, runs: 0, ms: 0 };
      total.runs += runs;
      total.ms += ms;
      totals.set(shape, total);
    }
  }
  return [...totals.values()].sort((a, b) => b.ms - a.ms);
}

/**
 * What the servers that wrote into `dir` spent their main thread on ({@link formatProfileSummary}),
 * then the statements that took most of it, each with its share of the busy time, its runs and
 * its time per run.
 */
export function profileReport(dir: string, top = 10): string {
  const summary = summarizeProfiles(mainThreadProfiles(dir));
  const statements = statementTotals(dir).slice(0, top);
  if (statements.length === 0) return formatProfileSummary(summary);
  return [
    formatProfileSummary(summary),
    'statements by time (SQLite, on the event loop):',
    ...statements.map(
      ({ shape, runs, ms }) =>
        `  ${percent(ms / summary.busyMs)}  ${runs.toLocaleString('en-US')} × ${((ms * 1000) / runs).toFixed(0)} µs  ${shape.slice(0, 100)}`,
    ),
  ].join('\n');
}

const percent = (share: number): string => `${(share * 100).toFixed(1).padStart(5)} %`;

/** The summary as lines of text: stages with their share of the busy time, then functions. */
export function formatProfileSummary(summary: ProfileSummary): string {
  return [
    `busy ${(summary.busyMs / 1000).toFixed(1)} s, idle ${(summary.idleMs / 1000).toFixed(1)} s`,
    ...summary.stages.map((s) => `  ${percent(s.share)}  ${s.stage}`),
    'functions by own time:',
    ...summary.topFunctions.map((f) => `  ${percent(f.share)}  ${f.name} (${f.stage})`),
  ].join('\n');
}
