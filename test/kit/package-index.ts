import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';

/**
 * A private Python package index, as an operator may run one: pure-Python wheels made here
 * and served over HTTP on loopback, both as a PEP 503 simple index (`/simple/`, for
 * `--index-url`) and as one flat page of links (`/files/`, for `--find-links`). Every request
 * it answers is recorded.
 */

/** Why pip cannot install with this interpreter, or undefined when it can. */
export function pipSkipReason(python: string): string | undefined {
  try {
    execFileSync(python, ['-m', 'pip', '--version'], { stdio: 'ignore', timeout: 20_000 });
    return undefined;
  } catch {
    return `${python} has no pip (Debian: apt-get install python3-pip)`;
  }
}

export interface Wheel {
  /** The project's name, as pip normalizes it (PEP 503): `agentry-probe`. */
  project: string;
  version: string;
  filename: string;
  bytes: Buffer;
}

/** PEP 503's normal form of a project name. */
function normalize(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

/**
 * A pure-Python wheel (`py3-none-any`) holding `files` (paths inside the wheel, such as
 * `pkg/__init__.py`, and their text), with the `.dist-info` a wheel needs: METADATA, WHEEL and
 * a RECORD of every file's hash.
 */
export function makeWheel(name: string, version: string, files: Record<string, string>): Wheel {
  const stem = `${name.replace(/[-.]+/g, '_')}-${version}`;
  const distInfo = `${stem}.dist-info`;
  const entries = new Map<string, Buffer>();
  for (const [path, text] of Object.entries(files)) entries.set(path, Buffer.from(text));
  entries.set(
    `${distInfo}/METADATA`,
    Buffer.from(`Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\n`),
  );
  entries.set(
    `${distInfo}/WHEEL`,
    Buffer.from(
      'Wheel-Version: 1.0\nGenerator: agentry-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
    ),
  );
  const record = [...entries].map(([path, data]) => {
    const digest = createHash('sha256').update(data).digest('base64url');
    return `${path},sha256=${digest},${data.length}`;
  });
  record.push(`${distInfo}/RECORD,,`);
  entries.set(`${distInfo}/RECORD`, Buffer.from(`${record.join('\n')}\n`));
  return {
    project: normalize(name),
    version,
    filename: `${stem}-py3-none-any.whl`,
    bytes: zip(entries),
  };
}

/** A zip archive of these entries, stored uncompressed. */
function zip(entries: Map<string, Buffer>): Buffer {
  const DOS_DATE = (0 << 9) | (1 << 5) | 1; // 1980-01-01, the earliest a zip can say
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [path, data] of entries) {
    const name = Buffer.from(path);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0, 6); // flags
    local.writeUInt16LE(0, 8); // stored
    local.writeUInt16LE(0, 10); // time
    local.writeUInt16LE(DOS_DATE, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28); // extra
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4); // made on Unix, so the mode below counts
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0, 8);
    central.writeUInt16LE(0, 10);
    central.writeUInt16LE(0, 12);
    central.writeUInt16LE(DOS_DATE, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(name.length, 28);
    // extra, comment, disk, internal attributes: none
    central.writeUInt32LE((0o100644 << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    centrals.push(central, name);
    offset += local.length + name.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.size, 8);
  end.writeUInt16LE(entries.size, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

/** The index on a loopback port. */
export class PackageIndex {
  /** `GET <path>` of every request answered, in order. */
  readonly requests: string[] = [];
  private readonly wheels: Wheel[] = [];
  private held: Promise<void> | undefined;

  private readonly server: Server;
  /** `http://127.0.0.1:<port>` once started. */
  url = '';

  private constructor(wheels: Wheel[]) {
    this.wheels.push(...wheels);
    this.server = createServer((request, response) => {
      void this.answer(request.method ?? 'GET', request.url ?? '/', response);
    });
  }

  static async start(wheels: Wheel[]): Promise<PackageIndex> {
    const index = new PackageIndex(wheels);
    index.server.listen(0, '127.0.0.1');
    await once(index.server, 'listening');
    index.url = `http://127.0.0.1:${(index.server.address() as AddressInfo).port}`;
    return index;
  }

  /** Holds every download of a wheel until the function answered is called. */
  holdDownloads(): () => void {
    let release!: () => void;
    this.held = new Promise<void>((resolve) => (release = resolve));
    return () => {
      this.held = undefined;
      release();
    };
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private async answer(method: string, url: string, response: ServerResponse): Promise<void> {
    const path = new URL(url, this.url).pathname;
    this.requests.push(`${method} ${path}`);
    const page = (links: Wheel[]): void => {
      const anchors = links.map((wheel) => {
        const digest = createHash('sha256').update(wheel.bytes).digest('hex');
        return `<a href="/files/${wheel.filename}#sha256=${digest}">${wheel.filename}</a><br>`;
      });
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end(`<!DOCTYPE html>\n<html><body>\n${anchors.join('\n')}\n</body></html>\n`);
    };
    if (path === '/simple/') {
      const projects = [...new Set(this.wheels.map((wheel) => wheel.project))];
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      response.end(
        `<!DOCTYPE html>\n<html><body>\n${projects.map((p) => `<a href="/simple/${p}/">${p}</a>`).join('\n')}\n</body></html>\n`,
      );
      return;
    }
    const project = /^\/simple\/([^/]+)\/$/.exec(path)?.[1];
    if (project !== undefined) {
      const links = this.wheels.filter((wheel) => wheel.project === normalize(project));
      if (links.length > 0) return page(links);
    }
    if (path === '/files/') return page(this.wheels);
    const wheel = this.wheels.find((w) => path === `/files/${w.filename}`);
    if (wheel !== undefined) {
      await this.held;
      response.writeHead(200, {
        'content-type': 'application/octet-stream',
        'content-length': wheel.bytes.length,
      });
      response.end(wheel.bytes);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' });
    response.end('not found\n');
  }
}
