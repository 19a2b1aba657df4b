/**
 * Redis with a password, an ACL user and TLS, against real redis-server processes: what
 * docs/redis.md ("Securing Redis") says and deploy/kubernetes/shared.yaml does.
 * - `requirepass` (the shared manifest's Redis arguments and REDIS_URL, with the Secret's value):
 *   two replicas share entries through it; a wrong or missing password is an unreachable Redis
 *   (served from L1, `redis connection error` logged without the password);
 * - the ACL rule of docs/redis.md, taken from the page itself: a pool shared through Redis,
 *   consumer shares, single flight, purges and the partition secret all work, and `ACL LOG` (every
 *   command or key the rule denied) stays empty;
 * - `rediss://` with the CLI and NODE_EXTRA_CA_CERTS.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { serveCli } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { pickPort } from '../helpers/ports.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';
import { hasOpenssl, makeTestCa } from '../helpers/tls-certs.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const HAS_REDIS = spawnSync('redis-server', ['--version']).status === 0;

/** A redis-server this file started (killed by its pid at the end), and `redis-cli` against it. */
interface Server {
  port: number;
  child: ChildProcess;
  cli(...args: string[]): string;
}

const servers: Server[] = [];
async function redisServer(args: string[], cliAuth: string[], tls = false): Promise<Server> {
  const port = await pickPort();
  const portArgs = tls ? ['--port', '0', '--tls-port', String(port)] : ['--port', String(port)];
  const child = spawn('redis-server', [...portArgs, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], {
    cwd: tmpdir(),
    stdio: 'ignore',
  });
  const cli = (...command: string[]): string =>
    spawnSync('redis-cli', ['-p', String(port), '--no-auth-warning', ...cliAuth, ...command], { encoding: 'utf8' }).stdout.trim();
  const server = { port, child, cli };
  servers.push(server);
  await until(() => cli('PING') === 'PONG', 5_000, `redis-server on ${port}`);
  return server;
}

afterAll(() => {
  for (const server of servers) server.child.kill('SIGKILL');
});

/** The shared manifest's Redis container arguments and the proxy's REDIS_URL, with `$(REDIS_PASSWORD)` given its value. */
function sharedManifest(password: string): { args: string[]; url: string } {
  const resources = parseAllDocuments(readFileSync(join(root, 'deploy/kubernetes/shared.yaml'), 'utf8')).map(
    (doc) =>
      doc.toJS() as {
        kind: string;
        metadata: { name: string };
        spec: { template: { spec: { containers: Array<Record<string, unknown>> } } };
      },
  );
  const container = (deployment: string): Record<string, unknown> =>
    resources.find((r) => r.kind === 'Deployment' && r.metadata.name === deployment)!.spec.template.spec.containers[0]!;
  const expand = (text: string): string => text.replace('$(REDIS_PASSWORD)', password);
  const args = (container('etagere-redis').args as string[]).map(expand).slice(1); // without "redis-server"
  const env = container('etagere').env as Array<{ name: string; value?: string }>;
  return { args, url: expand(env.find((e) => e.name === 'REDIS_URL')!.value!) };
}

const hits = async (proxy: TestProxy): Promise<number> =>
  (await proxy.metrics.l2Lookups.get()).values.find((v) => v.labels.result === 'hit')?.value ?? 0;

describe.skipIf(!HAS_REDIS)('Redis with a password (requirepass), as the shared manifest runs it', () => {
  const PASSWORD = testSecret('redis password of the redis-auth test', '7f3c9a1e5b2d4c6a8e0f1a3b5c7d9e1f');
  let fake: FakeUpstream;
  let redis: Server;
  let url: string;
  const proxies: TestProxy[] = [];

  beforeAll(async () => {
    fake = await startFakeUpstream();
    const manifest = sharedManifest(PASSWORD);
    expect(manifest.args.slice(0, 2)).toEqual(['--requirepass', PASSWORD]);
    redis = await redisServer(manifest.args, ['-a', PASSWORD]);
    url = manifest.url.replace('etagere-redis:6379', `127.0.0.1:${redis.port}`);
  });
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
    await fake?.close();
  });
  const proxyOn = async (redisUrl: string): Promise<TestProxy> => {
    const proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url }],
      redis: { url: redisUrl, command_timeout_ms: 1_000, lookup_timeout_ms: 1_000 },
      cache: { partition_secret: 'redis-auth-partition-secret-0001' },
    });
    proxies.push(proxy);
    return proxy;
  };

  it('two replicas share an entry through it', async () => {
    const [first, second] = [await proxyOn(url), await proxyOn(url)];
    await until(() => first.redisUp() === true && second.redisUp() === true, 5_000, 'both replicas on Redis');
    expect((await get(`${first.url}/repos/octocat/hello-world`)).status).toBe(200);
    await until(
      async () => (await get(`${second.url}/repos/octocat/hello-world`)).status === 200 && (await hits(second)) > 0,
      5_000,
      'an L2 hit',
    );
    expect(redis.cli('DBSIZE')).not.toBe('0');
  });

  it.each([
    ['a wrong password', (text: string) => text.replace(PASSWORD, 'not-the-password-at-all')],
    ['no password', (text: string) => text.replace(`:${PASSWORD}@`, '')],
  ])('hostile: %s is an unreachable Redis: served all the same, logged without the password', async (_what, change) => {
    const proxy = await proxyOn(change(url));
    expect((await get(`${proxy.url}/repos/octocat/hello-world`)).status).toBe(200);
    await until(() => /redis connection error/.test(proxy.logText()), 5_000, 'the connection error line');
    expect(proxy.redisUp()).toBe(false);
    expect(proxy.logText()).toMatch(/NOAUTH|WRONGPASS/);
    expect(proxy.logText()).not.toContain(PASSWORD);
  });
});

describe.skipIf(!HAS_REDIS)('Redis with the ACL user of docs/redis.md', () => {
  const PASSWORD = testSecret('redis ACL password of the redis-auth test', 'acl-user-password-4b8e2f6a0c');
  const KEY = testSecret('consumer key of the redis-auth test', 'redis-auth-consumer-key-77aa');
  let fake: FakeUpstream;
  let redis: Server;
  const proxies: TestProxy[] = [];

  beforeAll(async () => {
    const doc = readFileSync(join(root, 'docs/redis.md'), 'utf8');
    const rule = /^\s*ACL SETUSER etagere (.+)$/m.exec(doc)?.[1];
    expect(rule, 'docs/redis.md gives the ACL rule').toBeDefined();
    fake = await startFakeUpstream();
    redis = await redisServer([], []);
    expect(redis.cli('ACL', 'SETUSER', 'etagere', ...rule!.replace('>PASSWORD', `>${PASSWORD}`).split(/\s+/))).toBe('OK');
    // An operator of its own reads ACL LOG; the default user is off: etagere has its user only.
    expect(redis.cli('ACL', 'SETUSER', 'operator', 'on', `>${PASSWORD}-operator`, '~*', '&*', '+@all')).toBe('OK');
    expect(redis.cli('ACL', 'SETUSER', 'default', 'off')).toBe('OK');
  });
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
    await fake?.close();
  });

  it('runs everything etagere does on Redis with it, and Redis denies nothing', async () => {
    const url = `redis://etagere:${PASSWORD}@127.0.0.1:${redis.port}/0`;
    const start = async (): Promise<TestProxy> => {
      const proxy = await startTestProxy({
        upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
        pool: { tokens: [{ name: 'octo', value: 'demo_token_octocat_repo' }] },
        consumers: { enabled: true, keys: [{ name: 'web', value: KEY }] },
        webhooks: { secret: testSecret('webhook secret of the redis-auth test', 'redis-auth-webhook-secret-01') },
        redis: { url, command_timeout_ms: 1_000, lookup_timeout_ms: 1_000 },
      });
      proxies.push(proxy);
      return proxy;
    };
    const [one, two] = [await start(), await start()];
    await until(() => one.redisUp() === true && two.redisUp() === true, 5_000, 'both replicas on Redis');
    const key = { 'x-etagere-key': KEY };
    // Misses at once on both (single flight across replicas), then L2 hits, then a purge (marks).
    const answers = await Promise.all(
      [one, two, one, two].map((proxy, i) => get(`${proxy.url}/repos/octocat/hello-world?n=${i % 2}`, key)),
    );
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
    expect((await get(`${two.url}/orgs/etagere-org/repos`, key)).status).toBe(200);
    const purge = await request(`${one.adminUrl}/admin/purge`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prefix: '/repos/octocat' }),
    });
    expect(purge.statusCode).toBe(200);
    await purge.body.dump();
    expect((await get(`${two.url}/repos/octocat/hello-world?n=0`, key)).status).toBe(200);
    for (const proxy of [one, two]) {
      const errors = (await proxy.metrics.redisErrors.get()).values.reduce((sum, v) => sum + v.value, 0);
      expect(errors).toBe(0);
    }
    const operator = ['--user', 'operator', '--pass', `${PASSWORD}-operator`];
    expect(redis.cli(...operator, 'ACL', 'LOG')).toBe('');
    expect(Number(redis.cli(...operator, 'DBSIZE'))).toBeGreaterThan(0);
    // Not vacuous: a command outside the rule is denied, and ACL LOG records it.
    expect(redis.cli('--user', 'etagere', '--pass', PASSWORD, 'KEYS', '*')).toMatch(/NOPERM/);
    expect(redis.cli(...operator, 'ACL', 'LOG')).toMatch(/keys/);
  });
});

describe.skipIf(!HAS_REDIS || !hasOpenssl())('rediss:// with the CLI', () => {
  let dir: string;
  let fake: FakeUpstream;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'etagere-rediss-'));
    fake = await startFakeUpstream();
  });
  afterAll(async () => {
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('connects over TLS to a server whose CA is in NODE_EXTRA_CA_CERTS, with a password', async () => {
    const ca = makeTestCa(dir);
    const pair = ca.server('redis');
    const password = testSecret('rediss password of the redis-auth test', 'tls-redis-password-9c8b7a');
    const redis = await redisServer(
      ['--tls-cert-file', pair.cert, '--tls-key-file', pair.key, '--tls-auth-clients', 'no', '--requirepass', password],
      ['--tls', '--cacert', ca.cert, '-a', password],
      true,
    );
    const served = await serveCli({
      UPSTREAM_URL: fake.url,
      REDIS_URL: `rediss://:${password}@127.0.0.1:${redis.port}/0`,
      NODE_EXTRA_CA_CERTS: ca.cert,
    });
    try {
      await until(
        async () => /etagere_redis_up 1/.test((await get(`${served.admin}/metrics`).catch(() => ({ body: '' }))).body),
        20_000,
        'Redis up over TLS',
      );
      expect((await get(`${served.url}/repos/octocat/hello-world`)).status).toBe(200);
      await until(() => redis.cli('DBSIZE') !== '0', 5_000, 'an entry stored in Redis over TLS');
      expect(served.cli.stdout()).not.toContain(password);
    } finally {
      served.cli.child.kill('SIGTERM');
      await served.cli.exited;
    }
  });
});
