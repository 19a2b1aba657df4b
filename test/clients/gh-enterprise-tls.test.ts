/**
 * HTTPS on the proxy listener (`listen.tls`) and gh in GitHub Enterprise mode through it: the
 * built CLI (`etagere serve`) with ETAGERE_TLS_CERT_FILE / ETAGERE_TLS_KEY_FILE, a certificate
 * for 127.0.0.1 signed by a CA made for the test, and
 *
 *   SSL_CERT_FILE=<ca.pem> GH_HOST=127.0.0.1:<port> GH_ENTERPRISE_TOKEN=<token> gh api /repos/octocat/hello-world
 *   ... gh api --paginate '/orgs/etagere-org/repos?per_page=20'
 *
 * gh takes any host but github.com for GitHub Enterprise Server: REST under
 * `https://<host>/api/v3/`, its token from GH_ENTERPRISE_TOKEN. The proxy answers `/api/v3/...`
 * as the same request without the prefix (one cache entry), with Link and body addresses under
 * `https://127.0.0.1:<port>/api/v3/`.
 *
 * Also: the certificate reloads on SIGHUP (the served fingerprint changes), a bad new pair keeps
 * the old one, a bad pair at start is a one-line config error, and plain HTTP on the TLS port is
 * refused without harm. gh's tests are skipped, saying why, where gh is not installed; all of them
 * where openssl is not.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { runCli, type CliProcess, logLines } from '../helpers/cli.js';
import { clientEnv, listAll, probe, runClient, type Ran, ghEnv } from '../helpers/clients.js';
import { until } from '../helpers/proxy.js';
import { hasOpenssl, makeTestCa, type Pair, type TestCa } from '../helpers/tls-certs.js';

const OPENSSL = hasOpenssl();
const GH = ['/usr/bin/gh', 'gh'].find((candidate) => probe(candidate, ['--version']));
if (!OPENSSL) process.stderr.write('TLS listener tests skipped: the openssl CLI is not installed\n');
else if (GH === undefined) process.stderr.write('gh Enterprise-mode test skipped: gh is not installed (apt-get install gh)\n');

const POOL_TOKEN = 'tls_pool_token_0123456789abcdef';
const CLIENT_TOKEN = 'tls_client_token_0123456789abcd';

/** `etagere serve` (PORT 0) in front of `upstream`, with `env` on top; resolves with its URL once it listens. */
async function serve(upstream: string, env: Record<string, string | undefined>): Promise<{ cli: CliProcess; url: string }> {
  const cli = runCli(['serve'], {
    PORT: '0',
    ADMIN_PORT: '0',
    HOST: '127.0.0.1',
    ETAGERE_CONFIG: undefined,
    UPSTREAM_URL: upstream,
    ETAGERE_TOKENS: `pool=${POOL_TOKEN}`,
    ...env,
  });
  await until(
    () => logLines(cli).some((line) => line.msg === 'etagere listening') || cli.child.exitCode !== null,
    20_000,
    'the proxy to start',
  );
  const line = logLines(cli).find((entry) => entry.msg === 'etagere listening');
  if (line === undefined) throw new Error(`did not start: ${cli.stderr()}`);
  return { cli, url: String(line.url) };
}

async function stop(cli: CliProcess | undefined): Promise<void> {
  if (cli === undefined) return;
  if (cli.child.exitCode === null) cli.child.kill('SIGTERM');
  await cli.exited;
}

/** The SHA-256 fingerprint of the certificate a TLS listener serves now (not verified: the test compares it). */
function servedFingerprint(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: hostname, port: Number(port), rejectUnauthorized: false }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.once('error', reject);
  });
}

describe.skipIf(!OPENSSL)('HTTPS on the proxy listener', () => {
  let dir: string;
  let ca: TestCa;
  let pair: Pair;
  let fake: FakeUpstream;
  let proxy: { cli: CliProcess; url: string };
  let agent: Agent;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'etagere-tls-'));
    ca = makeTestCa(dir);
    pair = ca.server('server');
    fake = await startFakeUpstream({ tokens: parseTokenSpec(`${POOL_TOKEN}@bob:public_repo,${CLIENT_TOKEN}@dave:public_repo`) });
    // GraphQL on (/graphql, and /api/graphql in Enterprise mode); UPSTREAM_URL points it at the fake.
    const config = join(dir, 'etagere.yaml');
    writeFileSync(config, 'upstreams:\n  - { name: github, prefix: /, url: https://api.github.com, token_pool: true, graphql: true }\n');
    proxy = await serve(fake.url, { ETAGERE_CONFIG: config, ETAGERE_TLS_CERT_FILE: pair.cert, ETAGERE_TLS_KEY_FILE: pair.key });
    agent = new Agent({ connect: { ca: readFileSync(ca.cert) } });
  });
  afterAll(async () => {
    await stop(proxy?.cli);
    await agent?.close();
    await fake?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('listens on https:// with the configured certificate; its admin port stays plain HTTP', async () => {
    expect(proxy.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(await servedFingerprint(proxy.url)).toBe(pair.fingerprint);
    const res = await request(`${proxy.url}/repos/octocat/hello-world`, { dispatcher: agent });
    expect(res.statusCode).toBe(200);
    expect(((await res.body.json()) as { url: string }).url).toBe(`${proxy.url}/repos/octocat/hello-world`);
  });

  it('the Enterprise forms: /api/v3/... is the same resource (one cache entry), its addresses under /api/v3', async () => {
    fake.reset();
    const path = '/orgs/etagere-org/repos?per_page=20';
    const first = await request(`${proxy.url}/api/v3${path}`, { dispatcher: agent });
    expect(first.statusCode).toBe(200);
    expect(first.headers.link).toContain(`<${proxy.url}/api/v3/orgs/etagere-org/repos?per_page=20&page=2>; rel="next"`);
    const items = (await first.body.json()) as Array<{ url: string }>;
    expect(items[0]!.url.startsWith(`${proxy.url}/api/v3/repos/`)).toBe(true);
    const plain = await request(`${proxy.url}${path}`, { dispatcher: agent });
    expect(plain.headers['cache-status']).toMatch(/hit/);
    expect(plain.headers.link).toContain(`<${proxy.url}/orgs/etagere-org/repos?per_page=20&page=2>; rel="next"`);
    expect(((await plain.body.json()) as Array<{ url: string }>)[0]!.url.startsWith(`${proxy.url}/repos/`)).toBe(true);
    expect(fake.stats().byPath['/orgs/etagere-org/repos']).toBe(1);
    const rateLimit = await request(`${proxy.url}/api/v3/rate_limit`, { dispatcher: agent });
    expect(rateLimit.statusCode).toBe(200);
    await rateLimit.body.dump();
  });

  it('hostile: look-alike paths are not Enterprise forms', async () => {
    for (const path of ['/api/v3//127.0.0.1/x', '/api/v30/repos/octocat/hello-world', '/api/v3x']) {
      const res = await request(`${proxy.url}${path}`, { dispatcher: agent });
      expect(res.statusCode, path).toBe(404);
      await res.body.dump();
    }
  });

  it('hostile: a plain-HTTP request to the TLS port is dropped, and the listener keeps serving', async () => {
    const { port } = new URL(proxy.url);
    const answer = await new Promise<string>((resolve) => {
      const socket = netConnect(Number(port), '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
      let got = '';
      socket.on('data', (chunk: Buffer) => (got += chunk.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(got));
    });
    expect(answer).not.toContain('HTTP/1.1 200');
    const res = await request(`${proxy.url}/repos/octocat/hello-world`, { dispatcher: agent });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(proxy.cli.child.exitCode).toBe(null);
  });

  describe.skipIf(GH === undefined)('gh in Enterprise mode (GH_HOST, GH_ENTERPRISE_TOKEN, SSL_CERT_FILE)', () => {
    let home: string;
    const gh = (args: readonly string[]): Promise<Ran> =>
      runClient(
        GH!,
        ['api', ...args],
        clientEnv(
          ghEnv(home, {
            GH_HOST: new URL(proxy.url).host,
            GH_ENTERPRISE_TOKEN: CLIENT_TOKEN,
            SSL_CERT_FILE: ca.cert,
          }),
        ),
      );
    beforeAll(() => {
      home = join(dir, 'home');
      mkdirSync(home);
    });

    it('gh api /repos/octocat/hello-world: the record, with the client’s own token upstream', async () => {
      fake.reset();
      const ran = await gh(['/repos/octocat/hello-world', '--jq', '.full_name, .url']);
      expect(ran.code, `gh failed:\n${ran.stderr}`).toBe(0);
      expect(ran.stdout.trim().split('\n')).toEqual(['octocat/hello-world', `${proxy.url}/api/v3/repos/octocat/hello-world`]);
      expect(fake.stats().byCredential).toEqual({ dave: 1 });
    });

    it('gh api --paginate follows the /api/v3 Link headers: every item once; a second walk is answered from the cache', async () => {
      const ids = (await listAll<{ id: number }>(fake, '/orgs/etagere-org/repos')).map((repo) => repo.id);
      fake.reset();
      const walk = async (): Promise<number[]> => {
        const ran = await gh(['--paginate', '/orgs/etagere-org/repos?per_page=20', '--jq', '.[].id']);
        expect(ran.code, `gh failed:\n${ran.stderr}`).toBe(0);
        return ran.stdout
          .split('\n')
          .filter((l) => l !== '')
          .map(Number);
      };
      expect(await walk()).toEqual(ids);
      const pages = Math.ceil(ids.length / 20);
      expect(pages).toBeGreaterThan(2);
      expect(fake.stats().byPath['/orgs/etagere-org/repos']).toBe(pages);
      expect(await walk()).toEqual(ids);
      expect(fake.stats().byPath['/orgs/etagere-org/repos'], 'the second walk reached the fake').toBe(pages);
    });

    it('gh api graphql posts to /api/graphql: answered through the proxy', async () => {
      fake.reset();
      const ran = await gh(['graphql', '-f', 'query=query { repository(owner: "octocat", name: "hello-world") { nameWithOwner } }']);
      expect(ran.code, `gh failed:\n${ran.stderr}`).toBe(0);
      expect(JSON.parse(ran.stdout)).toEqual({ data: { repository: { nameWithOwner: 'octocat/hello-world' } } });
      expect(fake.stats().byPath['/graphql']).toBe(1);
    });

    it('hostile: gh without the CA refuses the certificate', async () => {
      const ran = await runClient(
        GH!,
        ['api', '/repos/octocat/hello-world'],
        clientEnv({
          GH_HOST: new URL(proxy.url).host,
          GH_ENTERPRISE_TOKEN: CLIENT_TOKEN,
          SSL_CERT_FILE: join(dir, 'missing-ca.pem'),
          GH_CONFIG_DIR: join(home, 'gh'),
          HOME: home,
          GH_NO_UPDATE_NOTIFIER: '1',
          GH_PROMPT_DISABLED: '1',
        }),
      );
      expect(ran.code).not.toBe(0);
      expect(ran.stderr).toMatch(/certificate/i);
    });
  });
});

describe.skipIf(!OPENSSL)('the listener’s certificate: reload and bad pairs', () => {
  let dir: string;
  let ca: TestCa;
  let fake: FakeUpstream;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'etagere-tls-reload-'));
    ca = makeTestCa(dir);
    fake = await startFakeUpstream({ tokens: parseTokenSpec(`${POOL_TOKEN}@bob:public_repo`) });
  });
  afterAll(async () => {
    await fake?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('SIGHUP serves the new pair; a bad new pair keeps the old one, with a warning', async () => {
    const [first, second, third] = [ca.server('first'), ca.server('second'), ca.server('third')];
    // The config names links in a directory of their own: the files behind them change without an
    // event there, so only SIGHUP can bring the new pair in.
    const live = join(dir, 'live');
    const links = join(dir, 'links');
    mkdirSync(live);
    mkdirSync(links);
    copyFileSync(first.cert, join(live, 'cert.pem'));
    copyFileSync(first.key, join(live, 'key.pem'));
    symlinkSync(join(live, 'cert.pem'), join(links, 'cert.pem'));
    symlinkSync(join(live, 'key.pem'), join(links, 'key.pem'));
    const { cli, url } = await serve(fake.url, {
      ETAGERE_TLS_CERT_FILE: join(links, 'cert.pem'),
      ETAGERE_TLS_KEY_FILE: join(links, 'key.pem'),
    });
    try {
      expect(await servedFingerprint(url)).toBe(first.fingerprint);
      copyFileSync(second.cert, join(live, 'cert.pem'));
      copyFileSync(second.key, join(live, 'key.pem'));
      cli.child.kill('SIGHUP');
      await until(() => logLines(cli).some((line) => line.msg === 'TLS certificate reloaded'), 5_000, 'the reload');
      expect(await servedFingerprint(url)).toBe(second.fingerprint);
      expect(logLines(cli).find((line) => line.msg === 'TLS certificate reloaded')).toMatchObject({ trigger: 'signal' });

      // A key of another certificate: refused, the second pair stays.
      copyFileSync(third.cert, join(live, 'cert.pem'));
      cli.child.kill('SIGHUP');
      await until(
        () => logLines(cli).some((line) => line.msg === 'TLS certificate not reloaded: the listener keeps the one it has'),
        5_000,
        'the warning',
      );
      expect(await servedFingerprint(url)).toBe(second.fingerprint);
      const warning = logLines(cli).find((line) => line.level === 'warn' && String(line.problem).startsWith('listen.tls'));
      expect(String(warning?.problem)).toContain('is not the key of the certificate');
      expect(cli.child.exitCode).toBe(null);
    } finally {
      await stop(cli);
    }
    expect(cli.stdout() + cli.stderr()).not.toContain('PRIVATE KEY');
  });

  it('a changed file is picked up without a signal', async () => {
    const [first, second] = [ca.server('watch-a'), ca.server('watch-b')];
    const files = join(dir, 'watched');
    mkdirSync(files);
    copyFileSync(first.cert, join(files, 'cert.pem'));
    copyFileSync(first.key, join(files, 'key.pem'));
    const { cli, url } = await serve(fake.url, {
      ETAGERE_TLS_CERT_FILE: join(files, 'cert.pem'),
      ETAGERE_TLS_KEY_FILE: join(files, 'key.pem'),
    });
    try {
      expect(await servedFingerprint(url)).toBe(first.fingerprint);
      copyFileSync(second.key, join(files, 'key.pem'));
      copyFileSync(second.cert, join(files, 'cert.pem'));
      await until(() => logLines(cli).some((line) => line.msg === 'TLS certificate reloaded'), 10_000, 'the reload');
      expect(await servedFingerprint(url)).toBe(second.fingerprint);
    } finally {
      await stop(cli);
    }
  });

  /** `etagere serve` with these TLS variables: it must exit 2 with one line on stderr. */
  const refused = async (env: Record<string, string>): Promise<string> => {
    const cli = runCli(['serve'], { PORT: '0', ADMIN_PORT: '0', ETAGERE_CONFIG: undefined, UPSTREAM_URL: fake.url, ...env });
    try {
      expect((await cli.exited).code, cli.stdout()).toBe(2);
    } finally {
      cli.child.kill('SIGKILL');
    }
    const err = cli.stderr();
    expect(err).not.toContain('PRIVATE KEY');
    expect(err).not.toContain('CERTIFICATE-----');
    return err;
  };

  it('hostile: a bad pair at start is a config error naming the variable, the key and the file, never their content', async () => {
    const [one, two] = [ca.server('bad-a'), ca.server('bad-b')];
    const mismatched = await refused({ ETAGERE_TLS_CERT_FILE: one.cert, ETAGERE_TLS_KEY_FILE: two.key });
    expect(mismatched.trim().split('\n')).toEqual([
      `etagere: ETAGERE_TLS_KEY_FILE: ${two.key} is not the key of the certificate in ${one.cert} (listen.tls.key_file)`,
    ]);
    const swapped = await refused({ ETAGERE_TLS_CERT_FILE: one.key, ETAGERE_TLS_KEY_FILE: one.cert });
    expect(swapped.trim()).toBe(`etagere: ETAGERE_TLS_CERT_FILE: ${one.key} is not a PEM certificate (listen.tls.cert_file)`);
    const missing = await refused({ ETAGERE_TLS_CERT_FILE: join(dir, 'nope.pem'), ETAGERE_TLS_KEY_FILE: one.key });
    expect(missing.trim()).toBe(`etagere: ETAGERE_TLS_CERT_FILE: cannot read ${join(dir, 'nope.pem')}: ENOENT (listen.tls.cert_file)`);
    const directory = await refused({ ETAGERE_TLS_CERT_FILE: one.cert, ETAGERE_TLS_KEY_FILE: dir });
    expect(directory.trim()).toBe(`etagere: ETAGERE_TLS_KEY_FILE: ${dir} is not a regular file (listen.tls.key_file)`);
  });

  it('hostile: a certificate without its key (or the other way round) is a config error naming the missing key', async () => {
    const one = ca.server('alone');
    expect(await refused({ ETAGERE_TLS_CERT_FILE: one.cert })).toContain('listen.tls.key_file: required with listen.tls.cert_file');
    expect(await refused({ ETAGERE_TLS_KEY_FILE: one.key })).toContain('listen.tls.cert_file: required with listen.tls.key_file');
  });
});
