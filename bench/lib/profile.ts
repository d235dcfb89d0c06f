import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Reading the CPU profiles that `npm run bench -- --cpu-prof` has each server write: where
 * the main thread's time went, by stage of a request (HTTP, routing and validation, auth,
 * the service's own code, query building, SQL statements, serialisation, the MCP and A2A
 * SDKs, garbage collection), so that a change can be told where it costs.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
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
 * Stages in the order they are tried on a frame's script URL; the first that matches names
 * the frame. A frame with no URL (native code, such as a SQLite statement's `all`) belongs
 * to the stage of the frame that called it.
 */
const STAGES: [stage: string, pattern: RegExp][] = [
  [
    'sql statements',
    /kysely\/dist\/esm\/dialect\/(sqlite|postgres)\/|better-sqlite3|node_modules\/pg/,
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
  ['agentry', /\/dist\/(?!cli)/],
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

function stageOfFrame(frame: CallFrame): string | undefined {
  if (SPECIAL[frame.functionName]) return SPECIAL[frame.functionName];
  if (!frame.url) return undefined;
  if (frame.functionName === 'stringify' || frame.functionName === 'parse') return undefined;
  return STAGES.find(([, pattern]) => pattern.test(frame.url))?.[0] ?? 'other';
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
      const own = stageOfFrame(node.callFrame);
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
      const file = frame.url.replace(/^.*\/(node_modules|dist)\//, '').replace(/^file:\/\//, '');
      const name = `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
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

/** The summary as lines of text: stages with their share of the busy time, then functions. */
export function formatProfileSummary(summary: ProfileSummary): string {
  const percent = (share: number): string => `${(share * 100).toFixed(1).padStart(5)} %`;
  return [
    `busy ${(summary.busyMs / 1000).toFixed(1)} s, idle ${(summary.idleMs / 1000).toFixed(1)} s`,
    ...summary.stages.map((s) => `  ${percent(s.share)}  ${s.stage}`),
    'functions by own time:',
    ...summary.topFunctions.map((f) => `  ${percent(f.share)}  ${f.name} (${f.stage})`),
  ].join('\n');
}
