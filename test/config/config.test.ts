import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { TestIdentity } from '../kit/uagent.js';

describe('verifier threads setting', () => {
  it('leaves one core to the event loop and uses at most two threads by default', () => {
    assert.equal(loadConfig({}, {}).verifierThreads, Math.min(availableParallelism() - 1, 2));
  });

  it('takes AGENTRY_VERIFIER_THREADS, 0 meaning on the event loop', () => {
    assert.equal(loadConfig({}, { AGENTRY_VERIFIER_THREADS: '0' }).verifierThreads, 0);
    assert.equal(loadConfig({}, { AGENTRY_VERIFIER_THREADS: '4' }).verifierThreads, 4);
  });

  it('refuses what is not a whole number', () => {
    assert.throws(
      () => loadConfig({}, { AGENTRY_VERIFIER_THREADS: 'two' }),
      (error) => error instanceof ConfigError && /AGENTRY_VERIFIER_THREADS/.test(error.message),
    );
  });
});

describe('log format setting', () => {
  it('takes AGENTRY_LOG_FORMAT and refuses anything but json or pretty', () => {
    assert.equal(loadConfig({}, { AGENTRY_LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
    assert.equal(loadConfig({}, { AGENTRY_LOG_FORMAT: 'json' }).logFormat, 'json');
    assert.throws(
      () => loadConfig({}, { AGENTRY_LOG_FORMAT: 'xml' }),
      (error) => error instanceof ConfigError && /AGENTRY_LOG_FORMAT/.test(error.message),
    );
  });

  it('writes JSON when stdout is not a terminal, as under a test runner', () => {
    assert.equal(process.stdout.isTTY, undefined);
    assert.equal(loadConfig({}, {}).logFormat, 'json');
  });
});

describe('connection timeouts and cap', () => {
  it('has defaults and takes the AGENTRY_* variables', () => {
    const defaults = loadConfig({}, {});
    assert.deepEqual(
      [
        defaults.requestTimeoutMs,
        defaults.headersTimeoutMs,
        defaults.keepAliveTimeoutMs,
        defaults.maxConnectionsPerAddress,
      ],
      [60_000, 10_000, 5_000, 256],
    );
    const set = loadConfig(
      {},
      {
        AGENTRY_REQUEST_TIMEOUT_MS: '0',
        AGENTRY_HEADERS_TIMEOUT_MS: '2000',
        AGENTRY_KEEP_ALIVE_TIMEOUT_MS: '700',
        AGENTRY_MAX_CONNECTIONS_PER_ADDRESS: '0',
      },
    );
    assert.deepEqual(
      [set.requestTimeoutMs, set.headersTimeoutMs, set.keepAliveTimeoutMs],
      [0, 2000, 700],
    );
    assert.equal(set.maxConnectionsPerAddress, 0);
  });

  it('refuses a headers timeout longer than the request timeout', () => {
    assert.throws(
      () =>
        loadConfig({}, { AGENTRY_REQUEST_TIMEOUT_MS: '1000', AGENTRY_HEADERS_TIMEOUT_MS: '2000' }),
      (error) => error instanceof ConfigError && /AGENTRY_HEADERS_TIMEOUT_MS/.test(error.message),
    );
  });
});

describe('Redis settings', () => {
  it('leaves Redis unset by default and takes AGENTRY_REDIS_URL and its key prefix', () => {
    assert.equal(loadConfig({}, {}).redisUrl, undefined);
    const config = loadConfig(
      {},
      { AGENTRY_REDIS_URL: 'redis://cache:6379/2', AGENTRY_REDIS_KEY_PREFIX: 'prod:' },
    );
    assert.equal(config.redisUrl, 'redis://cache:6379/2');
    assert.equal(config.redisKeyPrefix, 'prod:');
  });

  it('refuses a URL that is not redis:// or rediss://', () => {
    assert.throws(
      () => loadConfig({}, { AGENTRY_REDIS_URL: 'cache:6379' }),
      (error) => error instanceof ConfigError && /AGENTRY_REDIS_URL/.test(error.message),
    );
  });
});

describe('mailbox hold setting', () => {
  it('holds polls 20 s by default; AGENTRY_MAILBOX_HOLD_SECONDS changes it, 0 turns it off', () => {
    assert.equal(loadConfig({}, {}).mailboxHoldSeconds, 20);
    assert.equal(loadConfig({}, { AGENTRY_MAILBOX_HOLD_SECONDS: '0' }).mailboxHoldSeconds, 0);
    assert.equal(loadConfig({}, { AGENTRY_MAILBOX_HOLD_SECONDS: '240' }).mailboxHoldSeconds, 240);
  });

  it('refuses a hold the uAgents client would not wait for', () => {
    assert.throws(
      () => loadConfig({}, { AGENTRY_MAILBOX_HOLD_SECONDS: '241' }),
      (error) => error instanceof ConfigError && /AGENTRY_MAILBOX_HOLD_SECONDS/.test(error.message),
    );
  });
});

describe('proxy retry settings', () => {
  it('tries a failing proxy agent again after 2 s, doubling up to 30 s, unless told otherwise', () => {
    const defaults = loadConfig({}, {});
    assert.deepEqual([defaults.proxyRetryBaseMs, defaults.proxyRetryMaxMs], [2_000, 30_000]);
    const set = loadConfig(
      {},
      { AGENTRY_PROXY_RETRY_BASE_MS: '500', AGENTRY_PROXY_RETRY_MAX_MS: '60000' },
    );
    assert.deepEqual([set.proxyRetryBaseMs, set.proxyRetryMaxMs], [500, 60_000]);
  });

  it('refuses a longest wait shorter than the first', () => {
    assert.throws(
      () =>
        loadConfig({}, { AGENTRY_PROXY_RETRY_BASE_MS: '5000', AGENTRY_PROXY_RETRY_MAX_MS: '1000' }),
      (error) => error instanceof ConfigError && /AGENTRY_PROXY_RETRY_MAX_MS/.test(error.message),
    );
    assert.throws(
      () => loadConfig({}, { AGENTRY_PROXY_RETRY_BASE_MS: '0' }),
      (error) => error instanceof ConfigError && /AGENTRY_PROXY_RETRY_BASE_MS/.test(error.message),
    );
  });
});

describe('drain setting', () => {
  it('drains for 5 s by default and takes AGENTRY_DRAIN_SECONDS, 0 meaning no grace period', () => {
    assert.equal(loadConfig({}, {}).drainSeconds, 5);
    assert.equal(loadConfig({}, { AGENTRY_DRAIN_SECONDS: '0' }).drainSeconds, 0);
    assert.throws(
      () => loadConfig({}, { AGENTRY_DRAIN_SECONDS: '-1' }),
      (error) => error instanceof ConfigError && /AGENTRY_DRAIN_SECONDS/.test(error.message),
    );
  });
});

describe('storage asset settings', () => {
  it('takes assets of up to 10 MiB into the database by default', () => {
    const config = loadConfig({}, {});
    assert.equal(config.assetMaxBytes, 10 * 1024 * 1024);
    assert.equal(config.assetsDir, undefined);
  });

  it('takes AGENTRY_ASSET_MAX_BYTES up to 256 MiB and AGENTRY_ASSETS_DIR', () => {
    const config = loadConfig(
      {},
      { AGENTRY_ASSET_MAX_BYTES: '1048576', AGENTRY_ASSETS_DIR: ' ./data/assets ' },
    );
    assert.equal(config.assetMaxBytes, 1048576);
    assert.equal(config.assetsDir, './data/assets');
    for (const value of ['0', String(256 * 1024 * 1024 + 1), 'ten']) {
      assert.throws(
        () => loadConfig({}, { AGENTRY_ASSET_MAX_BYTES: value }),
        (error) => error instanceof ConfigError && /AGENTRY_ASSET_MAX_BYTES/.test(error.message),
      );
    }
    assert.throws(
      () => loadConfig({}, { AGENTRY_ASSETS_DIR: 'data\nassets' }),
      (error) => error instanceof ConfigError && /AGENTRY_ASSETS_DIR/.test(error.message),
    );
  });
});

describe('open agent self-registration setting', () => {
  it('is off by default and takes a user name, trimmed; blank is off', () => {
    assert.equal(loadConfig({}, {}).openAgentRegistration, undefined);
    const open = loadConfig({}, { AGENTRY_OPEN_AGENT_REGISTRATION: ' walk-ins ' });
    assert.equal(open.openAgentRegistration, 'walk-ins');
    const blank = loadConfig({}, { AGENTRY_OPEN_AGENT_REGISTRATION: '   ' });
    assert.equal(blank.openAgentRegistration, undefined);
  });
});

describe('hosting settings', () => {
  it('has defaults: no interpreter, the serving process as runner, no sandbox, this Agentry only', () => {
    const { hosting } = loadConfig({ databaseUrl: 'sqlite:/srv/agentry/agentry.db' }, {});
    assert.deepEqual(hosting, {
      python: undefined,
      runner: 'serve',
      sandbox: 'off',
      egress: 'agentry',
      allowRequirements: false,
      dir: '/srv/agentry/hosted',
      maxAgents: 50,
      memoryMb: 512,
      cpuPercent: 50,
      processes: 64,
      openFiles: 256,
      diskMb: 100,
      logLines: 1000,
      logLinesPerSecond: 100,
      storageKeys: 1000,
      storageBytes: 1024 * 1024,
      key: undefined,
      uidBase: 2_000_000_000,
    });
  });

  it('takes every AGENTRY_HOSTING_* variable', () => {
    const key = 'AB'.repeat(32);
    const { hosting } = loadConfig(
      {},
      {
        AGENTRY_HOSTING_PYTHON: '/opt/venv/bin/python3',
        AGENTRY_HOSTING_RUNNER: 'separate',
        AGENTRY_HOSTING_SANDBOX: 'bwrap',
        AGENTRY_HOSTING_EGRESS: 'any',
        AGENTRY_HOSTING_ALLOW_REQUIREMENTS: 'true',
        AGENTRY_HOSTING_DIR: '/var/lib/agentry/agents',
        AGENTRY_HOSTING_MAX_AGENTS: '10',
        AGENTRY_HOSTING_MEMORY_MB: '256',
        AGENTRY_HOSTING_CPU_PERCENT: '25',
        AGENTRY_HOSTING_PROCESSES: '32',
        AGENTRY_HOSTING_OPEN_FILES: '128',
        AGENTRY_HOSTING_DISK_MB: '50',
        AGENTRY_HOSTING_UID_BASE: '300000',
        AGENTRY_HOSTING_LOG_LINES: '500',
        AGENTRY_HOSTING_LOG_LINES_PER_SECOND: '20',
        AGENTRY_HOSTING_STORAGE_KEYS: '100',
        AGENTRY_HOSTING_STORAGE_BYTES: '65536',
        AGENTRY_HOSTING_KEY: key,
      },
    );
    assert.deepEqual(hosting, {
      python: '/opt/venv/bin/python3',
      runner: 'separate',
      sandbox: 'bwrap',
      egress: 'any',
      allowRequirements: true,
      dir: '/var/lib/agentry/agents',
      maxAgents: 10,
      memoryMb: 256,
      cpuPercent: 25,
      processes: 32,
      openFiles: 128,
      diskMb: 50,
      uidBase: 300000,
      logLines: 500,
      logLinesPerSecond: 20,
      storageKeys: 100,
      storageBytes: 65536,
      key: key.toLowerCase(),
    });
  });

  it('puts agents’ directories beside the database given on the command line', () => {
    const { hosting } = loadConfig({ databaseUrl: 'sqlite:/data/x/agentry.db' }, {});
    assert.equal(hosting.dir, '/data/x/hosted');
    const pg = loadConfig({ databaseUrl: 'postgres://db/agentry' }, {});
    assert.match(pg.hosting.dir, /\/data\/hosted$/);
  });

  it('refuses bad values with a sentence naming the setting, and never repeats the key', () => {
    const refused = (env: Record<string, string>, message: RegExp) =>
      assert.throws(
        () => loadConfig({}, env),
        (error) => error instanceof ConfigError && message.test(error.message),
      );
    refused(
      { AGENTRY_HOSTING_RUNNER: 'both' },
      /AGENTRY_HOSTING_RUNNER must be one of serve, separate/,
    );
    refused(
      { AGENTRY_HOSTING_SANDBOX: 'docker' },
      /AGENTRY_HOSTING_SANDBOX must be one of off, bwrap/,
    );
    refused(
      { AGENTRY_HOSTING_EGRESS: 'none' },
      /AGENTRY_HOSTING_EGRESS must be one of agentry, any/,
    );
    refused({ AGENTRY_HOSTING_ALLOW_REQUIREMENTS: 'maybe' }, /AGENTRY_HOSTING_ALLOW_REQUIREMENTS/);
    refused(
      { AGENTRY_HOSTING_MEMORY_MB: '8' },
      /AGENTRY_HOSTING_MEMORY_MB must be an integer of at least 16/,
    );
    refused(
      { AGENTRY_HOSTING_UID_BASE: '4294967290', AGENTRY_HOSTING_MAX_AGENTS: '10' },
      /AGENTRY_HOSTING_UID_BASE plus AGENTRY_HOSTING_MAX_AGENTS must be below 4294967295/,
    );
    refused(
      { AGENTRY_HOSTING_UID_BASE: '0' },
      /AGENTRY_HOSTING_UID_BASE must be an integer of at least 1000/,
    );
    refused(
      { AGENTRY_HOSTING_MAX_AGENTS: 'many' },
      /AGENTRY_HOSTING_MAX_AGENTS must be a whole number/,
    );
    refused(
      { AGENTRY_HOSTING_CPU_PERCENT: '100000' },
      /AGENTRY_HOSTING_CPU_PERCENT must be at most/,
    );
    refused(
      { AGENTRY_HOSTING_STORAGE_BYTES: String(1024 ** 3) },
      /AGENTRY_HOSTING_STORAGE_BYTES must be at most/,
    );
    refused({ AGENTRY_HOSTING_LOG_LINES: '1000000' }, /AGENTRY_HOSTING_LOG_LINES must be at most/);
    refused({ AGENTRY_HOSTING_DIR: 'a\nb' }, /AGENTRY_HOSTING_DIR/);
    const secret = 'not-hex-but-a-secret';
    assert.throws(
      () => loadConfig({}, { AGENTRY_HOSTING_KEY: secret }),
      (error) =>
        error instanceof ConfigError &&
        /AGENTRY_HOSTING_KEY must be 32 bytes as 64 hexadecimal digits/.test(error.message) &&
        !error.message.includes(secret),
    );
  });

  it('federates with no one by default, and takes peers, upstreams, a timeout and a cache', () => {
    assert.deepEqual(loadConfig({}, {}).federation, {
      peers: [],
      upstreams: [],
      timeoutMs: 2000,
      cacheSeconds: 300,
    });
    const peer = TestIdentity.random().address;
    const config = loadConfig(
      {},
      {
        AGENTRY_PEERS: ` http://10.77.2.2:8000/=${peer} , https://b.example.com=${peer}`,
        AGENTRY_UPSTREAMS: 'https://agentverse.ai/',
        AGENTRY_FEDERATION_TIMEOUT_MS: '500',
        AGENTRY_FEDERATION_CACHE_SECONDS: '0',
      },
    );
    assert.deepEqual(config.federation, {
      peers: [
        { url: 'http://10.77.2.2:8000', address: peer },
        { url: 'https://b.example.com', address: peer },
      ],
      upstreams: ['https://agentverse.ai'],
      timeoutMs: 500,
      cacheSeconds: 0,
    });
  });

  it('refuses a peer without its address, and an upstream that is not an http(s) URL', () => {
    for (const peers of ['http://10.77.2.2:8000', 'ftp://x=agent1qqq', 'http://x=bob']) {
      assert.throws(
        () => loadConfig({}, { AGENTRY_PEERS: peers }),
        /AGENTRY_PEERS must list peers as URL=agent1…/,
      );
    }
    assert.throws(
      () => loadConfig({}, { AGENTRY_UPSTREAMS: 'agentverse.ai' }),
      /AGENTRY_UPSTREAMS must list http\(s\) URLs/,
    );
  });
});
