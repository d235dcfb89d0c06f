import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { currentUsage, hostOf, newRegisteredAgent, proveIdentity } from '../kit/agents.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, type JsonResponse } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/** The digest of the chat protocol (AgentChatProtocol 0.3.0) as uagents-core computes it. */
const CHAT_PROTOCOL = 'proto:30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62';
const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const PYTHON_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;
const MAX_BYTES = 64 * 1024;

/** A real PNG: `width`×`height` RGB pixels of a gradient, with valid chunk CRCs. */
function png(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: RGB
  const rows: Buffer[] = [];
  for (let y = 0; y < height; y++) {
    const row = Buffer.alloc(1 + width * 3);
    for (let x = 0; x < width; x++) {
      row[1 + x * 3] = (x * 255) / width;
      row[2 + x * 3] = (y * 255) / height;
      row[3 + x * 3] = 128;
    }
    rows.push(row);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(Buffer.concat(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** JSON text as Python's `json.dumps` writes a flat object (what `requests` sends for `json=`). */
function pythonJson(value: Record<string, unknown>): string {
  return `{${Object.entries(value)
    .map(([key, v]) => `${JSON.stringify(key)}: ${JSON.stringify(v)}`)
    .join(', ')}}`;
}

/**
 * The requests uagents-core's `ExternalStorage` makes, byte for byte in what matters: its
 * paths (with their trailing slashes), its headers (a Bearer key, or an agent attestation
 * valid for 3600 s from now with a fresh nonce), its JSON bodies, and what it reads back.
 */
class ExternalStorage {
  constructor(
    private readonly storageUrl: string,
    private readonly credentials: { apiToken?: string; identity?: TestIdentity },
    private readonly clock: ManualClock,
  ) {}

  private authHeader(): string {
    if (this.credentials.apiToken) return `Bearer ${this.credentials.apiToken}`;
    const now = Math.floor(this.clock.now() / 1000);
    return `Agent ${this.credentials.identity!.attestation({ validFrom: now, validTo: now + 3600 })}`;
  }

  private send(method: string, path: string, body?: Record<string, unknown>) {
    const headers: Record<string, string> = { authorization: this.authHeader() };
    if (body) headers['content-type'] = 'application/json';
    return fetch(this.storageUrl + path, {
      method,
      headers,
      ...(body && { body: pythonJson(body) }),
    });
  }

  async createAsset(name: string, content: Buffer, mimeType = 'text/plain', lifetimeHours = 24) {
    const res = await this.send('POST', '/assets/', {
      name,
      mime_type: mimeType,
      contents: content.toString('base64'),
      lifetime_hours: lifetimeHours,
    });
    const text = await res.text();
    if (res.status !== 201) throw new Error(`Asset creation failed: ${res.status}, ${text}`);
    return (JSON.parse(text) as { asset_id: string }).asset_id;
  }

  async upload(assetId: string, content: Buffer, mimeType = 'text/plain') {
    const res = await this.send('PUT', `/assets/${assetId}/contents/`, {
      contents: content.toString('base64'),
      mime_type: mimeType,
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`Upload failed: ${res.status}, ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  }

  async download(assetId: string) {
    const res = await this.send('GET', `/assets/${assetId}/contents/`);
    const text = await res.text();
    if (res.status !== 200) throw new Error(`Download failed: ${res.status}, ${text}`);
    return JSON.parse(text) as { contents: string; mime_type: string; asset_id: string };
  }

  async setPermissions(assetId: string, agentAddress: string, read = true, write = true) {
    const res = await this.send('PUT', `/assets/${assetId}/permissions/`, {
      agent_address: agentAddress,
      read,
      write,
    });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`Set permissions failed: ${res.status}, ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  }
}

/** How an Agentverse SDK agent uploads an attachment: POST with its attestation (120 s). */
async function sdkUpload(
  t: TestServer,
  clock: ManualClock,
  agent: TestIdentity,
  content: Buffer,
  mimeType: string,
): Promise<JsonResponse<any>> {
  const now = Math.floor(clock.now() / 1000);
  return call(t.url, 'POST', '/v1/storage/assets/', {
    authorization: `Agent ${agent.attestation({ validFrom: now, validTo: now + 120 })}`,
    rawBody: pythonJson({
      contents: content.toString('base64'),
      mime_type: mimeType,
      lifetime_hours: 24,
    }),
  });
}

describeOnEachDialect('storage assets', (dialect) => {
  const clock = new ManualClock();
  let t: TestServer;
  let bobKey: string;
  let carolKey: string;
  /** Alice's agent, which sends; Bob's agent, which receives; Bob's other agent. */
  let a: TestIdentity;
  let b: TestIdentity;
  let c: TestIdentity;

  before(async () => {
    t = await startTestServer({ dialect, clock, config: { assetMaxBytes: MAX_BYTES } });
    bobKey = await t.addUser('bob');
    carolKey = await t.addUser('carol');
    a = await newRegisteredAgent(hostOf(t), t.userKey);
    b = await newRegisteredAgent(hostOf(t), bobKey);
    c = await newRegisteredAgent(hostOf(t), bobKey);
  });
  after(() => t.close());

  const storageUrl = () => `${t.url}/v1/storage`;
  const agentAuth = (agent: TestIdentity) => agent.authorization(clock.now());
  const asAgent = (agent: TestIdentity) =>
    new ExternalStorage(storageUrl(), { identity: agent }, clock);
  const asUser = (key: string) => new ExternalStorage(storageUrl(), { apiToken: key }, clock);
  const download = (id: string, options: { key?: string; authorization?: string }) =>
    call(t.url, 'GET', `/v1/storage/assets/${id}/contents/`, options);

  async function userId(key: string): Promise<string> {
    const principal = await t.server.ctx.services.keys.authenticate(key);
    assert.equal(principal.kind, 'user');
    return principal.userId;
  }

  const storedBytes = async (key: string): Promise<number> =>
    (await currentUsage(t.url, key)).bytes_stored;

  it("answers ExternalStorage's own calls with a user key: create, share, upload, download", async () => {
    const storage = asUser(t.userKey);
    const first = Buffer.from('first version');
    const id = await storage.createAsset('notes.txt', first, 'text/plain', 2);
    assert.match(id, UUID4);

    const granted = await storage.setPermissions(id, b.address.toUpperCase(), true, false);
    assert.deepEqual(granted, { agent_address: b.address, read: true, write: false });

    const second = Buffer.from('second version, longer than the first');
    const uploaded = await storage.upload(id, second, 'text/markdown');
    assert.deepEqual(uploaded, {
      asset_id: id,
      reference: `${t.url}/v1/storage/assets/${id}/contents/`,
    });

    const downloaded = await storage.download(id);
    assert.deepEqual(Object.keys(downloaded).sort(), [
      'asset_id',
      'contents',
      'expires_at',
      'mime_type',
      'reference',
    ]);
    assert.equal(downloaded.asset_id, id);
    assert.equal(Buffer.from(downloaded.contents, 'base64').toString(), second.toString());
    assert.equal(downloaded.mime_type, 'text/markdown');
    assert.match((downloaded as unknown as { expires_at: string }).expires_at, PYTHON_ISO);

    // B was granted reading: it downloads with its own identity, as a receiving agent does.
    const byB = await asAgent(b).download(id);
    assert.equal(byB.contents, second.toString('base64'));

    const metadata = await call(t.url, 'GET', `/v1/storage/assets/${id}/`, { key: t.userKey });
    assert.equal(metadata.status, 200, metadata.text);
    assert.equal(metadata.body.asset_id, id);
    assert.equal(metadata.body.name, 'notes.txt');
    assert.equal(metadata.body.size, second.length);
    assert.equal(metadata.body.checksum, createHash('sha256').update(second).digest('hex'));
    assert.equal(metadata.body.protocol, `agent-storage://${new URL(t.url).host}/${id}`);
    assert.equal(
      Date.parse(metadata.body.expires_at) - Date.parse(metadata.body.created_at),
      2 * 3_600_000,
    );
  });

  it('carries an image from one agent to another the way the chat protocol does, and to no other', async () => {
    const thumbnail = png(12, 8);
    const image = png(48, 32);
    // A, as the Agentverse SDK does, creates the asset with its attestation: it is its owner's.
    const created = await sdkUpload(t, clock, a, thumbnail, 'image/png');
    assert.equal(created.status, 201, created.text);
    const assetId = created.body.asset_id as string;
    assert.match(assetId, UUID4);
    const uri = created.body.protocol as string;
    assert.equal(uri, `agent-storage://${new URL(t.url).host}/${assetId}`);
    // A puts the full image in it with ExternalStorage and its own identity, and shares it
    // with B for reading.
    const uploaded = await asAgent(a).upload(assetId, image, 'image/png');
    assert.equal(uploaded.asset_id, assetId);
    const shared = await call(t.url, 'PUT', `/v1/storage/assets/${assetId}/permissions/`, {
      authorization: agentAuth(a),
      body: { agent_address: b.address, read: true, write: false },
    });
    assert.equal(shared.status, 200, shared.text);

    // A sends B a ChatMessage with a ResourceContent naming the asset, through B's mailbox.
    const chatMessage = {
      timestamp: new Date(clock.now()).toISOString(),
      msg_id: randomUUID(),
      content: [
        {
          type: 'resource',
          resource_id: randomUUID(),
          resource: { uri, metadata: { mime_type: 'image/png', role: 'image' } },
        },
      ],
    };
    const envelope = a.signEnvelope(
      makeEnvelope({
        sender: a.address,
        target: b.address,
        payloadJson: JSON.stringify(chatMessage),
        protocolDigest: CHAT_PROTOCOL,
      }),
    );
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 200, submitted.text);

    // B polls its mailbox, reads the resource's URI and downloads the image with its identity.
    const polled = await call(t.url, 'GET', `/v2/agents/${b.address}/mailbox`, {
      authorization: agentAuth(b),
    });
    assert.equal(polled.status, 200, polled.text);
    assert.equal(polled.body.length, 1);
    const received = JSON.parse(
      Buffer.from(polled.body[0].envelope.payload, 'base64').toString('utf8'),
    ) as typeof chatMessage;
    const resource = received.content[0]!.resource;
    assert.ok(resource.uri.startsWith('agent-storage://'));
    const named = resource.uri.split('/').pop()!;
    const downloaded = await asAgent(b).download(named);
    assert.equal(downloaded.mime_type, 'image/png');
    assert.ok(Buffer.from(downloaded.contents, 'base64').equals(image));

    // The image counts in Alice's storage, A's owner.
    assert.ok((await storedBytes(t.userKey)) >= image.length);

    // No one else reads it: C (Bob's other agent), Bob's key, Carol's key, an unknown agent.
    for (const options of [
      { authorization: agentAuth(c) },
      { key: bobKey },
      { key: carolKey },
      { authorization: agentAuth(TestIdentity.random()) },
    ]) {
      const refused = await download(assetId, options);
      assert.equal(refused.status, 404, refused.text);
      assert.match(refused.body.detail, /No asset/);
      const metadata = await call(t.url, 'GET', `/v1/storage/assets/${assetId}/`, options);
      assert.equal(metadata.status, 404, metadata.text);
    }
    await assert.rejects(asAgent(c).download(assetId), /Download failed: 404/);
    // B may read it but not change, share or delete it: it knows the asset, so 403.
    await assert.rejects(asAgent(b).upload(assetId, Buffer.from('x')), /Upload failed: 403/);
    const reshared = await call(t.url, 'PUT', `/v1/storage/assets/${assetId}/permissions/`, {
      authorization: agentAuth(b),
      body: { agent_address: c.address, read: true, write: true },
    });
    assert.equal(reshared.status, 403, reshared.text);
    const deleted = await call(t.url, 'DELETE', `/v1/storage/assets/${assetId}/`, {
      authorization: agentAuth(b),
    });
    assert.equal(deleted.status, 403, deleted.text);
    // Alice, the owner, reads it too, and sees who it is shared with.
    assert.equal((await download(assetId, { key: t.userKey })).status, 200);
    const permissions = await call(t.url, 'GET', `/v1/storage/assets/${assetId}/permissions/`, {
      key: t.userKey,
    });
    assert.deepEqual(permissions.body, {
      items: [{ agent_address: b.address, read: true, write: false }],
      pagination: { offset: 0, limit: 100, total: 1 },
    });

    // Withdrawn, B reads it no more; deleted by A, nobody does, and Alice's bytes are freed.
    const before = await storedBytes(t.userKey);
    const withdrawn = await call(
      t.url,
      'DELETE',
      `/v1/storage/assets/${assetId}/permissions/?agent_address=${b.address}`,
      { authorization: agentAuth(a) },
    );
    assert.equal(withdrawn.status, 204, withdrawn.text);
    assert.equal((await download(assetId, { authorization: agentAuth(b) })).status, 404);
    const removed = await call(t.url, 'DELETE', `/v1/storage/assets/${assetId}/`, {
      authorization: agentAuth(a),
    });
    assert.equal(removed.status, 204, removed.text);
    assert.equal((await download(assetId, { key: t.userKey })).status, 404);
    assert.equal(await storedBytes(t.userKey), before - image.length);
  });

  it('opens the agent-storage:// link examples build, for whoever may read the asset', async () => {
    // The image agents' way: create with a key, share with the sender of the request, and
    // name the asset `agent-storage://{storage_url}/{asset_id}` in a ResourceContent.
    const image = png(20, 10);
    const storage = asUser(t.userKey);
    const id = await storage.createAsset('picture', image, 'image/png');
    await storage.setPermissions(id, b.address, true, false);
    const uri = `agent-storage://${storageUrl()}/${id}`;
    // A reader drops the scheme and fetches the rest, as Python's requests does.
    const link = uri.slice('agent-storage://'.length);
    assert.equal(link, `${t.url}/v1/storage/${id}`);
    const open = (headers: Record<string, string>) =>
      fetch(link, {
        headers: { accept: '*/*', 'user-agent': 'python-requests/2.32.3', ...headers },
      });

    for (const authorization of [agentAuth(b), `Bearer ${t.userKey}`]) {
      const res = await open({ authorization });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(res.headers.get('content-type'), 'image/png');
      assert.equal(res.headers.get('content-security-policy'), 'sandbox');
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(image));
    }
    // Asked for JSON, it answers as the contents route does.
    const json = await call(t.url, 'GET', `/v1/storage/${id}`, {
      authorization: agentAuth(b),
      headers: { accept: 'application/json' },
    });
    assert.equal(json.status, 200, json.text);
    assert.equal(json.body.asset_id, id);
    assert.equal(json.body.mime_type, 'image/png');
    assert.ok(Buffer.from(json.body.contents, 'base64').equals(image));

    // Nobody else: another agent, another user (404, as for nothing), no credentials (401).
    for (const authorization of [agentAuth(c), `Bearer ${carolKey}`]) {
      const res = await open({ authorization });
      assert.equal(res.status, 404, await res.text());
    }
    assert.equal((await open({})).status, 401);
    const malformed = await call(t.url, 'GET', '/v1/storage/not-an-asset', { key: t.userKey });
    assert.equal(malformed.status, 422, malformed.text);
    assert.deepEqual(malformed.body.detail[0].loc, ['path', 'asset_id']);
  });

  it('refuses an agent registered to no one the storage of anyone (403), and ExternalStorage with it', async () => {
    const stray = TestIdentity.random();
    const res = await sdkUpload(t, clock, stray, Buffer.from('hello'), 'text/plain');
    assert.equal(res.status, 403, res.text);
    assert.match(res.body.detail, /not registered/);
    const anonymous = await call(t.url, 'POST', '/v1/storage/assets/', {
      body: { lifetime_hours: 1 },
    });
    assert.equal(anonymous.status, 401, anonymous.text);
    // Listing is the user's: an agent's attestation is no user key.
    const listing = await call(t.url, 'GET', '/v1/storage/assets/', {
      authorization: agentAuth(a),
    });
    assert.equal(listing.status, 401, listing.text);
  });

  it("lets a user who proved an agent's key delegate it unregistered, whose assets then count in that user's storage", async () => {
    const stray = TestIdentity.random();
    const path = `/v1/storage/assets/delegations/${stray.address}`;
    await proveIdentity(hostOf(t), carolKey, stray);
    const delegated = await call(t.url, 'PUT', path, { key: carolKey });
    assert.equal(delegated.status, 200, delegated.text);
    assert.deepEqual(delegated.body, {
      agent_address: stray.address,
      owner: await userId(carolKey),
    });
    assert.equal(
      (await call(t.url, 'PUT', path, { key: carolKey })).status,
      200,
      'again: no change',
    );
    const taken = await call(t.url, 'PUT', path, { key: bobKey });
    assert.equal(taken.status, 403, taken.text);
    assert.match(taken.body.detail, /Prove that agent .* is yours/);
    const listed = await call(t.url, 'GET', '/v1/storage/assets/delegations/', { key: carolKey });
    assert.deepEqual(listed.body, { items: [stray.address] });

    const before = await storedBytes(carolKey);
    const created = await sdkUpload(t, clock, stray, Buffer.from('delegated'), 'text/plain');
    assert.equal(created.status, 201, created.text);
    assert.equal(await storedBytes(carolKey), before + 'delegated'.length);
    const mine = await call(t.url, 'GET', '/v1/storage/assets/', { key: carolKey });
    assert.ok(
      mine.body.items.some((item: { asset_id: string }) => item.asset_id === created.body.asset_id),
    );

    assert.equal((await call(t.url, 'DELETE', path, { key: bobKey })).status, 404);
    assert.equal((await call(t.url, 'DELETE', path, { key: carolKey })).status, 204);
    const refused = await sdkUpload(t, clock, stray, Buffer.from('again'), 'text/plain');
    assert.equal(refused.status, 403, refused.text);
    // What it made stays Carol's, and the agent still reaches it.
    const kept = await download(created.body.asset_id, { authorization: agentAuth(stray) });
    assert.equal(kept.status, 200, kept.text);
  });

  describe('delegations without proof', () => {
    it("refuse a user who holds neither the agent's key nor its registration, and never block its holder", async () => {
      const u = TestIdentity.random();
      const path = `/v1/storage/assets/delegations/${u.address}`;
      // Bob names an agent that is not his: refused, and nothing kept.
      const squat = await call(t.url, 'PUT', path, { key: bobKey });
      assert.equal(squat.status, 403, squat.text);
      const bobs = await call(t.url, 'GET', '/v1/storage/assets/delegations/', { key: bobKey });
      assert.ok(!bobs.body.items.includes(u.address));
      // Carol, who holds U's key, proves it and delegates it; U's uploads are hers.
      await proveIdentity(hostOf(t), carolKey, u);
      const held = await call(t.url, 'PUT', path, { key: carolKey });
      assert.equal(held.status, 200, held.text);
      const created = await sdkUpload(t, clock, u, Buffer.from('carol'), 'text/plain');
      assert.equal(created.status, 201, created.text);
      assert.equal(
        (await download(created.body.asset_id, { key: bobKey })).status,
        404,
        'Bob reads none of U’s uploads',
      );
      assert.equal((await download(created.body.asset_id, { key: carolKey })).status, 200);
    });

    it("refuse another user's registered agent, and end with the agent's registration", async () => {
      const a = await newRegisteredAgent(hostOf(t), t.userKey);
      const path = `/v1/storage/assets/delegations/${a.address}`;
      assert.equal((await call(t.url, 'PUT', path, { key: bobKey })).status, 403);
      // Its owner delegates it, then deletes it: the delegation goes with the registration.
      assert.equal((await call(t.url, 'PUT', path, { key: t.userKey })).status, 200);
      const removed = await call(t.url, 'DELETE', `/v2/agents/${a.address}`, { key: t.userKey });
      assert.equal(removed.status, 200, removed.text);
      const listed = await call(t.url, 'GET', '/v1/storage/assets/delegations/', {
        key: t.userKey,
      });
      assert.ok(!listed.body.items.includes(a.address));
      const refused = await sdkUpload(t, clock, a, Buffer.from('orphan'), 'text/plain');
      assert.equal(refused.status, 403, refused.text);
    });
  });

  it('takes contents as base64 in JSON (either alphabet, padded or not) or as bytes, and gives them back either way', async () => {
    const bytes = Buffer.from([0xfb, 0xff, 0xfe, 0x00, 0x01, 0x3e, 0x3f]);
    const created = await call(t.url, 'POST', '/v1/storage/assets/', {
      key: t.userKey,
      body: { lifetime_hours: 1, contents: bytes.toString('base64url'), mime_type: null },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.body.asset_id as string;
    assert.equal(created.body.size, bytes.length);
    assert.equal(created.body.mime_type, null);
    const json = await download(id, { key: t.userKey });
    assert.equal(json.body.contents, bytes.toString('base64'));
    assert.equal(json.body.mime_type, 'application/octet-stream');

    // The bytes of a PNG sent as they are, with their type as the Content-Type.
    const image = png(8, 8);
    const raw = await fetch(`${t.url}/v1/storage/assets/${id}/contents/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.userKey}`, 'content-type': 'image/png' },
      body: image,
    });
    assert.equal(raw.status, 200, await raw.text());
    const asBytes = await fetch(`${t.url}/v1/storage/assets/${id}/contents/`, {
      headers: { authorization: `Bearer ${t.userKey}`, accept: 'image/png' },
    });
    assert.equal(asBytes.status, 200);
    assert.equal(asBytes.headers.get('content-type'), 'image/png');
    // Whatever was uploaded runs nothing on this origin when a browser opens it.
    assert.equal(asBytes.headers.get('content-security-policy'), 'sandbox');
    assert.equal(asBytes.headers.get('x-content-type-options'), 'nosniff');
    assert.ok(Buffer.from(await asBytes.arrayBuffer()).equals(image));
    const asJson = await download(id, { key: t.userKey });
    assert.ok(Buffer.from(asJson.body.contents, 'base64').equals(image));

    // Text that is not base64, and bytes without a usable type, are refused as 422 items.
    const invalid = await call(t.url, 'PUT', `/v1/storage/assets/${id}/contents/`, {
      key: t.userKey,
      body: { contents: 'not base64!', mime_type: 'text/plain' },
    });
    assert.equal(invalid.status, 422, invalid.text);
    assert.deepEqual(invalid.body.detail[0].loc, ['body', 'contents']);
    const badType = await call(t.url, 'PUT', `/v1/storage/assets/${id}/contents/`, {
      key: t.userKey,
      body: { contents: 'aGk=', mime_type: 'png' },
    });
    assert.equal(badType.status, 422, badType.text);
    const untyped = await fetch(`${t.url}/v1/storage/assets/${id}/contents/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.userKey}`, 'content-type': 'not a type' },
      body: image,
    });
    assert.equal(untyped.status, 422);
    // A download of an asset made without contents says so.
    const empty = await call(t.url, 'POST', '/v1/storage/assets/', {
      key: t.userKey,
      body: { lifetime_hours: 1 },
    });
    assert.equal(empty.status, 201, empty.text);
    const none = await download(empty.body.asset_id, { key: t.userKey });
    assert.equal(none.status, 404);
    assert.match(none.body.detail, /no contents yet/);
  });

  it('refuses contents larger than the limit with 413, whether the body holds them or not', async () => {
    const id = await asUser(t.userKey).createAsset('big', Buffer.from('small'));
    const tooBig = randomBytes(MAX_BYTES + 1);
    const json = await call(t.url, 'PUT', `/v1/storage/assets/${id}/contents/`, {
      key: t.userKey,
      body: { contents: tooBig.toString('base64'), mime_type: 'application/octet-stream' },
    });
    assert.equal(json.status, 413, json.text);
    assert.match(json.body.detail, new RegExp(`at most ${MAX_BYTES} bytes`));
    const raw = await fetch(`${t.url}/v1/storage/assets/${id}/contents/`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${t.userKey}`, 'content-type': 'application/octet-stream' },
      body: tooBig,
    });
    assert.equal(raw.status, 413);
    const created = await call(t.url, 'POST', '/v1/storage/assets/', {
      key: t.userKey,
      body: { lifetime_hours: 1, contents: tooBig.toString('base64') },
    });
    assert.equal(created.status, 413, created.text);
    // A body beyond what any asset needs is refused before it is read whole.
    const huge = await call(t.url, 'PUT', `/v1/storage/assets/${id}/contents/`, {
      key: t.userKey,
      body: { contents: randomBytes(MAX_BYTES * 2).toString('base64'), mime_type: 'text/plain' },
    });
    assert.equal(huge.status, 413, huge.text);
    // The asset kept its contents.
    const kept = await download(id, { key: t.userKey });
    assert.equal(Buffer.from(kept.body.contents, 'base64').toString(), 'small');
  });

  it("counts assets in the owner's storage quota, beside the mailboxes", async () => {
    const daveKey = await t.addUser(`dave-${dialect}`);
    const dave = await userId(daveKey);
    const agent = await newRegisteredAgent(hostOf(t), daveKey);
    await t.server.ctx.services.usage.setLimits(dave, { bytesStored: 1000 });
    const storage = asUser(daveKey);
    const first = await storage.createAsset('a', randomBytes(600));
    assert.equal(await storedBytes(daveKey), 600);
    // The agent's upload counts for Dave too, and would pass the quota.
    const refused = await sdkUpload(t, clock, agent, randomBytes(500), 'application/octet-stream');
    assert.equal(refused.status, 406, refused.text);
    assert.match(refused.body.detail, /^Storage quota reached 600 \/ 1000/);
    // Growing an asset counts the difference; shrinking frees it.
    await assert.rejects(storage.upload(first, randomBytes(1001)), /Upload failed: 406/);
    await storage.upload(first, randomBytes(900));
    assert.equal(await storedBytes(daveKey), 900);
    await storage.upload(first, randomBytes(100));
    assert.equal(await storedBytes(daveKey), 100);
    clock.advance(1000);
    const second = await sdkUpload(t, clock, agent, randomBytes(800), 'application/octet-stream');
    assert.equal(second.status, 201, second.text);
    assert.equal(await storedBytes(daveKey), 900);
    // A mailbox message now meets the same full quota.
    const sender = TestIdentity.random();
    const envelope = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target: agent.address,
        payloadJson: '{"pad":"' + 'x'.repeat(200) + '"}',
      }),
    );
    const submitted = await call(t.url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
    assert.equal(submitted.status, 406, submitted.text);
    // The listing shows Dave his assets, the agent's among them, newest first.
    const listing = await call(t.url, 'GET', '/v1/storage/assets/?limit=1', { key: daveKey });
    assert.equal(listing.status, 200, listing.text);
    assert.deepEqual(listing.body.pagination, { offset: 0, limit: 1, total: 2 });
    assert.equal(listing.body.items[0].asset_id, second.body.asset_id);
    const others = await call(t.url, 'GET', '/v1/storage/assets/', { key: carolKey });
    assert.ok(!others.text.includes(first));
  });

  it('stops serving an asset when its lifetime ends, and the sweep deletes it and frees its bytes', async () => {
    const erinKey = await t.addUser(`erin-${dialect}`);
    const storage = asUser(erinKey);
    const id = await storage.createAsset('short', Buffer.from('one hour'), 'text/plain', 1);
    const later = await storage.createAsset('long', Buffer.from('two hours'), 'text/plain', 2);
    await storage.setPermissions(id, b.address);
    clock.advance(3_600_000 - 1000);
    assert.equal((await download(id, { authorization: agentAuth(b) })).status, 200);
    clock.advance(1000);
    for (const options of [{ key: erinKey }, { authorization: agentAuth(b) }]) {
      const gone = await download(id, options);
      assert.equal(gone.status, 404, gone.text);
    }
    assert.equal((await download(later, { key: erinKey })).status, 200);
    const listing = await call(t.url, 'GET', '/v1/storage/assets/', { key: erinKey });
    assert.deepEqual(
      listing.body.items.map((item: { asset_id: string }) => item.asset_id),
      [later],
    );
    assert.equal(await storedBytes(erinKey), 'one hour'.length + 'two hours'.length);
    assert.ok((await t.server.ctx.services.storageAssets.sweepExpired()) >= 1);
    assert.equal(await storedBytes(erinKey), 'two hours'.length);
    assert.equal(await t.server.ctx.store.repos.storageAssets.find(id), undefined);
    // Lifetimes are 1 to 24 hours.
    const tooLong = await call(t.url, 'POST', '/v1/storage/assets/', {
      key: erinKey,
      body: { lifetime_hours: 25 },
    });
    assert.equal(tooLong.status, 422, tooLong.text);
  });

  it('keeps contents in a directory when one is configured, and removes their files with them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentry-assets-'));
    const files = await startTestServer({
      dialect,
      clock,
      config: { assetMaxBytes: MAX_BYTES, assetsDir: dir },
    });
    try {
      const filesOf = () =>
        readdirSync(dir, { recursive: true, withFileTypes: true })
          .filter((entry) => entry.isFile())
          .map((entry) => entry.name);
      const storage = new ExternalStorage(
        `${files.url}/v1/storage`,
        { apiToken: files.userKey },
        clock,
      );
      const image = png(16, 16);
      const id = await storage.createAsset('image.png', image, 'image/png');
      assert.deepEqual(
        filesOf().map((name) => name.split('.')[0]),
        [id],
      );
      const stored = await files.server.ctx.store.db
        .selectFrom('storage_asset_contents')
        .selectAll()
        .execute();
      assert.deepEqual(stored, []);
      const replaced = png(20, 20);
      await storage.upload(id, replaced, 'image/png');
      assert.equal(filesOf().length, 1, 'the old file goes once the new one is committed');
      const downloaded = await storage.download(id);
      assert.ok(Buffer.from(downloaded.contents, 'base64').equals(replaced));
      const removed = await call(files.url, 'DELETE', `/v1/storage/assets/${id}/`, {
        key: files.userKey,
      });
      assert.equal(removed.status, 204, removed.text);
      assert.deepEqual(filesOf(), []);
    } finally {
      await files.close();
      rmSync(dir, { recursive: true, force: true });
    }
    assert.equal(existsSync(dir), false);
  });
});
