import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { validate } from 'dockerfile-utils';
import { repositoryRoot } from '../kit/process.js';

/**
 * The deployment files and the configuration must not drift apart: every AGENTRY_ variable
 * they set is one the program reads and the operations guide documents, and the guide's
 * table documents exactly what the program reads.
 */

const read = (path: string): string => readFileSync(join(repositoryRoot, path), 'utf8');
const variablesIn = (text: string): Set<string> =>
  new Set(text.match(/\bAGENTRY_[A-Z0-9_]*[A-Z0-9]\b/g) ?? []);

const configSource = read('src/config/index.ts');
const operations = read('docs/operations.md');
const compose = read('compose.yaml');
const dockerfile = read('Dockerfile');

/** The variables the configuration module reads. */
const readByProgram = variablesIn(configSource);
/** The variables named in the first column of the guide's configuration table. */
const documented = new Set(
  operations
    .split('\n')
    .filter((line) => /^\|\s*`AGENTRY_/.test(line))
    .flatMap((line) => [...variablesIn(line.split('|')[1]!)]),
);

describe('deployment files and configuration', () => {
  it('the guide documents exactly the variables the program reads', () => {
    assert.ok(readByProgram.size > 20, 'the configuration module was read');
    assert.deepEqual(
      [...readByProgram].filter((name) => !documented.has(name)),
      [],
    );
    assert.deepEqual(
      [...documented].filter((name) => !readByProgram.has(name)),
      [],
    );
  });

  for (const [file, text] of [
    ['compose.yaml', compose],
    ['Dockerfile', dockerfile],
  ] as const) {
    it(`every AGENTRY_ variable ${file} sets exists and is documented`, () => {
      const used = variablesIn(text);
      assert.ok(used.size > 0);
      assert.deepEqual(
        [...used].filter((name) => !readByProgram.has(name)),
        [],
      );
      assert.deepEqual(
        [...used].filter((name) => !documented.has(name)),
        [],
      );
    });
  }

  it('compose runs PostgreSQL, Redis, two replicas sharing both, and a proxy at the public URL', () => {
    for (const service of ['postgres', 'redis', 'agentry-1', 'agentry-2', 'proxy']) {
      assert.match(compose, new RegExp(`^  ${service}:$`, 'm'), `service ${service}`);
    }
    assert.match(compose, /AGENTRY_DATABASE_URL: postgres:\/\/[^\n]*@postgres:5432\//);
    assert.match(compose, /AGENTRY_REDIS_URL: redis:\/\/redis:6379/);
    assert.match(compose, /AGENTRY_PUBLIC_URL: /);
    const caddyfile = read('deploy/Caddyfile');
    assert.match(caddyfile, /reverse_proxy \{\$PROXY_UPSTREAMS:agentry-1:8000 agentry-2:8000\}/);
    assert.match(caddyfile, /health_uri \/ready/);
    // The replicas trust the proxy's forwarding headers, and only the proxy's.
    const trusted = /AGENTRY_TRUSTED_PROXIES: (\S+)/.exec(compose)?.[1];
    const proxyAddress = /^ {2}proxy:$[\s\S]*?ipv4_address: (\S+)/m.exec(compose)?.[1];
    assert.ok(trusted && proxyAddress, 'compose names the proxy and trusts it');
    assert.equal(trusted, proxyAddress);
    assert.ok(compose.includes(`subnet: ${proxyAddress.replace(/\.\d+$/, '.0')}/24`));
  });

  it('the Dockerfile is valid, multi-stage, runs as an unprivileged user and checks /health', () => {
    const problems = validate(dockerfile).map(
      (d) => `line ${d.range.start.line + 1}: ${d.message}`,
    );
    assert.deepEqual(problems, []);
    assert.ok((dockerfile.match(/^FROM /gm) ?? []).length >= 2, 'multi-stage');
    const users = dockerfile.match(/^USER (\S+)/gm) ?? [];
    assert.equal(users.length, 1);
    assert.doesNotMatch(users[0]!, /root|\b0\b/);
    assert.match(dockerfile, /^HEALTHCHECK [^\n]*\\\n[^\n]*\/health/m);
  });
});
