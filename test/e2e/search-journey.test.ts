import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Server as HttpServer } from 'node:http';
import type { EnvelopeFields } from '../../src/crypto/index.js';
import { hostOf, registerAgent } from '../kit/agents.js';
import { postStatus, registerInAlmanac, signedStatusUpdate, unixSeconds } from '../kit/almanac.js';
import {
  dispense,
  endpointAgentServer,
  mailboxEndpointOf,
  resolveEndpoints,
  weightedRandomSample,
} from '../kit/client.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call } from '../kit/http.js';
import { ManualClock, startTestServer, type TestServer } from '../kit/server.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';
import { closeNow, listenOnLoopback } from '../kit/loopback.js';

/**
 * Search on a private network, played as uAgents 0.25 plays it: `ctx.broadcast(digest, msg)`
 * (context.py: search by digest, keep the active records, then resolve and send to each) and
 * `ctx.send("team.agent", msg)` (resolver.py NameServiceResolver: the domain's agents, one
 * picked by weight, then resolved by address). Receivers are a mailbox agent, a proxy agent
 * and an agent with its own endpoint.
 */

const CHAT = 'proto:30a801ed3a83f9a0ff0a9f1e6fe958cb91da1fc2218b153df7b6cbf87bd33d62';
const OTHER = 'proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2';

describeOnEachDialect('search journey: broadcast and names', (dialect) => {
  const clock = new ManualClock();
  const sender = TestIdentity.random();
  const mailboxAgent = TestIdentity.random();
  const proxyAgent = TestIdentity.random();
  const endpointAgent = TestIdentity.random();
  const sleeping = TestIdentity.random();
  const unrelated = TestIdentity.random();
  const inboxes = new Map<string, EnvelopeFields[]>();
  const servers: HttpServer[] = [];
  const urls = new Map<string, string>();
  let t: TestServer;
  let agentverse: string;
  const now = () => unixSeconds(clock.now());

  before(async () => {
    for (const agent of [proxyAgent, endpointAgent, sleeping, unrelated]) {
      const inbox: EnvelopeFields[] = [];
      inboxes.set(agent.address, inbox);
      const server = endpointAgentServer(agent, inbox);
      servers.push(server);
      urls.set(agent.address, `${await listenOnLoopback(server)}/submit`);
    }
    t = await startTestServer({ dialect, clock, config: { allowPrivateTargets: true } });
    agentverse = t.config.publicUrl;

    await registerAgent(hostOf(t), t.userKey, mailboxAgent);
    await registerInAlmanac(agentverse, mailboxAgent, {
      timestamp: now(),
      protocols: [CHAT],
      endpoints: [{ url: mailboxEndpointOf(agentverse), weight: 1 }],
    });
    await registerAgent(hostOf(t), t.userKey, proxyAgent, {
      redirectUrl: urls.get(proxyAgent.address)!,
    });
    await registerInAlmanac(agentverse, proxyAgent, {
      timestamp: now(),
      protocols: [CHAT],
      endpoints: [{ url: `${agentverse}/v2/agents/proxy/submit`, weight: 1 }],
    });
    for (const agent of [endpointAgent, sleeping]) {
      await registerAgent(hostOf(t), t.userKey, agent);
      await registerInAlmanac(agentverse, agent, {
        timestamp: now(),
        protocols: [CHAT],
        endpoints: [{ url: urls.get(agent.address)!, weight: 1 }],
      });
    }
    const off = await postStatus(
      agentverse,
      sleeping.address,
      signedStatusUpdate(sleeping, { active: false, timestamp: now() }),
    );
    assert.equal(off.status, 200, off.text);
    await registerInAlmanac(agentverse, unrelated, {
      timestamp: now(),
      protocols: [OTHER],
      endpoints: [{ url: urls.get(unrelated.address)!, weight: 1 }],
    });
  });
  after(async () => {
    await t.close();
    for (const server of servers) await closeNow(server);
  });

  /** `ctx.send` to an address: resolve, then post to the endpoints in turn. */
  async function send(target: string, text: string): Promise<EnvelopeFields> {
    const { endpoints } = await resolveEndpoints(agentverse, target);
    const envelope = sender.signEnvelope(
      makeEnvelope({
        sender: sender.address,
        target,
        payloadJson: JSON.stringify({ text }),
        expires: now() + 30,
      }),
    );
    await dispense(envelope, endpoints);
    return envelope;
  }

  async function mailboxOf(agent: TestIdentity): Promise<EnvelopeFields[]> {
    const authorization = `Agent ${agent.attestation({ validFrom: now(), validTo: now() + 1000 })}`;
    const res = await call(agentverse, 'GET', `/v2/agents/${agent.address}/mailbox`, {
      authorization,
    });
    assert.equal(res.status, 200, res.text);
    return res.body.map((item: { envelope: EnvelopeFields }) => item.envelope);
  }

  it('ctx.broadcast reaches every active agent of the protocol, and no other', async () => {
    const search = await call(agentverse, 'POST', '/v1/almanac/search', {
      body: { text: CHAT.slice('proto:'.length) },
    });
    assert.equal(search.status, 200, search.text);
    const targets = (search.body as { address: string; status: string }[])
      .filter((agent) => agent.status === 'active')
      .map((agent) => agent.address)
      .slice(0, 100);
    assert.deepEqual(
      new Set(targets),
      new Set([mailboxAgent.address, proxyAgent.address, endpointAgent.address]),
    );
    const sent = new Map<string, EnvelopeFields>();
    for (const target of targets) sent.set(target, await send(target, 'hello everyone'));

    assert.deepEqual(await mailboxOf(mailboxAgent), [sent.get(mailboxAgent.address)]);
    assert.deepEqual(inboxes.get(proxyAgent.address), [sent.get(proxyAgent.address)]);
    assert.deepEqual(inboxes.get(endpointAgent.address), [sent.get(endpointAgent.address)]);
    assert.deepEqual(inboxes.get(sleeping.address), []);
    assert.deepEqual(inboxes.get(unrelated.address), []);
  });

  it('ctx.send("team.agent") arrives at one of the agents of the name, by weight', async () => {
    const created = await call(agentverse, 'POST', '/v2/users/domains', {
      key: t.userKey,
      body: {
        domain_name: 'team.agent',
        agent_records: [
          { address: endpointAgent.address, weight: 1 },
          { address: proxyAgent.address, weight: 1 },
        ],
      },
    });
    assert.equal(created.status, 201, created.text);
    for (const inbox of inboxes.values()) inbox.length = 0;

    for (let i = 0; i < 20; i++) {
      const domain = await call(agentverse, 'GET', '/v1/almanac/domains/team.agent?prefix=agent');
      assert.equal(domain.status, 200, domain.text);
      const agents = domain.body.assigned_agents as { address: string; weight: number }[];
      const [address] = weightedRandomSample(
        agents.map((agent) => agent.address),
        agents.map((agent) => agent.weight),
        1,
      );
      await send(address!, `message ${i}`);
    }
    const atEndpoint = inboxes.get(endpointAgent.address)!.length;
    const atProxy = inboxes.get(proxyAgent.address)!.length;
    assert.equal(atEndpoint + atProxy, 20);
    assert.ok(atEndpoint > 0 && atProxy > 0, `${atEndpoint} and ${atProxy}`);
  });
});
