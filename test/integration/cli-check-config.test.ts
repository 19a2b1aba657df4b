/**
 * The command line as operators expect it, through the built CLI: `etagere check-config` (valid:
 * exit 0, the effective config with every secret masked; invalid: exit 2, one line naming the key
 * and the variable that set it), `-v`, an unknown flag (the command's usage, exit 2), and one-line
 * errors without a stack trace, hostile config files included (a directory, binary junk, an alias
 * bomb, a device that never ends). `etagere cache` and `purge` need only the admin address.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, runCli } from '../helpers/cli.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { deadPort, startJsonUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const SECRETS = {
  inline: 'ghp_checkConfigInlineToken_0001',
  env: 'ghp_checkConfigEnvToken_0002',
  file: 'ghp_checkConfigFileToken_0003',
  consumer: 'ck_checkConfigConsumerKey_0004',
  webhook: 'whsec_checkConfigWebhook_0005',
  partition: 'partition_checkConfigSecret_0006',
  redis: 'redisPassword_checkConfig_0007',
  upstreamPassword: 'upstreamPassword_checkConfig_0008',
  query: 'queryToken_checkConfig_0009',
};

const dir = mkdtempSync(join(tmpdir(), 'etagere-check-config-'));
function file(name: string, text: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function expectOneLine(lines: string[], pattern: RegExp): void {
  expect(lines, lines.join('\n')).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(lines[0]).not.toMatch(/^\s+at /);
}

const ISOLATED = {
  ETAGERE_CONFIG: undefined,
  ETAGERE_TOKENS: undefined,
  ETAGERE_TOKENS_FILE: undefined,
  REDIS_URL: undefined,
  PORT: undefined,
};

describe('etagere check-config', () => {
  it('a valid config: exit 0, the effective config as YAML with names kept and every secret masked', { timeout: 30_000 }, async () => {
    const key = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const keyFile = file('app.pem', key);
    const tokensFile = file('tokens', `# pool\nfile-bot=${SECRETS.file}\n`);
    const config = file(
      'good.yaml',
      [
        'upstreams:',
        `  - { name: github, prefix: /, url: "https://ci:${SECRETS.upstreamPassword}@api.example.com/?access_token=${SECRETS.query}", token_pool: true }`,
        'pool:',
        `  tokens: [{ name: inline-bot, value: ${SECRETS.inline} }, { name: env-bot, env: CHECK_CONFIG_TOKEN }]`,
        `  apps: [{ name: ci-app, app_id: 7, private_key_file: ${JSON.stringify(keyFile)} }]`,
        'consumers:',
        `  enabled: true`,
        `  keys: [{ name: web, value: ${SECRETS.consumer} }]`,
        `webhooks: { secret: ${SECRETS.webhook} }`,
        `cache: { partition_secret: ${SECRETS.partition} }`,
        `redis: { url: "redis://default:${SECRETS.redis}@redis.internal:6379/0" }`,
      ].join('\n'),
    );
    const cli = runCli(['check-config', '--config', config], {
      ...ISOLATED,
      CHECK_CONFIG_TOKEN: SECRETS.env,
      ETAGERE_TOKENS_FILE: tokensFile,
    });
    const { code, lines } = await finished(cli);
    expect(code, cli.stderr()).toBe(0);
    expect(lines).toEqual(['etagere: the configuration is valid']);
    const out = cli.stdout();
    for (const [what, secret] of Object.entries(SECRETS)) expect(out, what).not.toContain(secret);
    expect(out).not.toContain('PRIVATE KEY');
    for (const name of ['inline-bot', 'env-bot', 'file-bot', 'ci-app', 'web', keyFile, tokensFile]) expect(out).toContain(name);
    expect(out).toContain('redis://default:***@redis.internal:6379/0');
    expect(out).toContain('https://ci:***@api.example.com/?access_token=***');
    expect(out).toMatch(/partition_secret: <masked>/);
    expect(out).toMatch(/private_key: <masked>/);
    expect(out).toMatch(/^# etagere \d+\.\d+\.\d+: the effective configuration/);
  });

  it.each([
    [{ PORT: 'eighty' }, /^etagere: invalid config \(environment\): PORT: must be a port number, 0-65535 \(listen\.port\)$/],
    [{ ADMIN_PORT: '70000' }, /^etagere: invalid config \(environment\): ADMIN_PORT: must be a port number, 0-65535 \(admin\.port\)$/],
    [
      { REDIS_URL: `http://user:${SECRETS.redis}@r` },
      /^etagere: invalid config \(environment\): REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL \(redis\.url\)$/,
    ],
    [{ ETAGERE_TOKENS_FILE: join(dir, 'missing') }, /^etagere: ETAGERE_TOKENS_FILE: cannot read .*missing: ENOENT \(pool\.tokens_file\)$/],
  ])('an invalid variable %j: exit 2, one line naming the variable and the key', { timeout: 20_000 }, async (env, pattern) => {
    const cli = runCli(['check-config'], { ...ISOLATED, ...env });
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expectOneLine(lines, pattern);
    expect(cli.stdout()).toBe('');
    expect(cli.stderr()).not.toContain(SECRETS.redis);
  });

  it('a bad key in the file named by ETAGERE_CONFIG: exit 2, one line naming the file and the key', { timeout: 20_000 }, async () => {
    const bad = file('bad.yaml', 'listen:\n  port: 80\n  colour: red\nshutdown: { drain_timeout_ms: soon }\n');
    const cli = runCli(['check-config'], { ...ISOLATED, ETAGERE_CONFIG: bad });
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expectOneLine(
      lines,
      /^etagere: invalid config \(.*bad\.yaml \+ environment\): listen: .*colour.*; shutdown\.drain_timeout_ms: must be a number$/,
    );
  });

  const bomb = (): string => {
    let text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n';
    let previous = 'a';
    for (const name of 'bcdefghij') {
      text += `${name}: &${name} [${Array.from({ length: 9 }, () => `*${previous}`).join(',')}]\n`;
      previous = name;
    }
    return `${text}listen: *j\n`;
  };

  it.each([
    ['a directory', () => dir, /^etagere: config file .* is a directory: give the YAML file$/],
    [
      'binary junk',
      () => file('junk.yaml', Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 0xff, 0xfe, 10, 0x1b, 0x5b])),
      /^etagere: config file .* is not text/,
    ],
    [
      'bytes that are not UTF-8',
      () => file('latin1.yaml', Buffer.from('listen: {host: caf\xe9}\n', 'latin1')),
      /^etagere: config file .* is not UTF-8 text$/,
    ],
    [
      'a YAML alias bomb (billion laughs)',
      () => file('bomb.yaml', bomb()),
      /^etagere: config file .* is not valid YAML: Excessive alias count/,
    ],
    ['flow collections nested 100,000 deep', () => file('deep.yaml', '['.repeat(100_000)), /^etagere: config file .* is not valid YAML: /],
    ['a device that never ends', () => '/dev/zero', /^etagere: config file \/dev\/zero is larger than 4 MiB: not a config file$/],
    ['a file that does not exist', () => join(dir, 'nope.yaml'), /^etagere: cannot read config file .*nope\.yaml: ENOENT/],
  ])('hostile: %s as the config file is one line, exit 2', { timeout: 20_000 }, async (_what, path, pattern) => {
    const cli = runCli(['check-config', '--config', path()], ISOLATED);
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expectOneLine(lines, pattern);
  });
});

describe('the command line', () => {
  it.each([['-v'], ['--version']])('etagere %s prints the version', { timeout: 20_000 }, async (flag) => {
    const cli = runCli([flag]);
    expect((await cli.exited).code).toBe(0);
    expect(cli.stdout()).toMatch(/^etagere \d+\.\d+\.\d+\n$/);
  });

  it.each([
    ['check-config', ['check-config', '--colour']],
    ['serve', ['serve', '--colour']],
    ['cache', ['cache', 'stats', '--colour']],
    ['purge', ['purge', '--colour']],
  ])('an unknown flag of %s: one line, then that command usage, exit 2', { timeout: 20_000 }, async (command, args) => {
    const cli = runCli(args, ISOLATED);
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expect(lines[0]).toBe(`etagere: unknown flag --colour for etagere ${command}`);
    expect(lines[1]).toMatch(new RegExp(`^usage: etagere ${command} `));
    expect(lines.at(-1)).toBe(`  (etagere ${command} --help lists every flag)`);
    expect(cli.stderr()).not.toMatch(/^\s+at /m);
  });

  it('cache stats with no proxy listening: one line saying what to do, no stack trace, exit 1', { timeout: 20_000 }, async () => {
    const port = await deadPort();
    const cli = runCli(['cache', 'stats'], { ...ISOLATED, ADMIN_PORT: String(port) });
    const { code, lines } = await finished(cli);
    expect(code).toBe(1);
    expectOneLine(
      lines,
      new RegExp(
        `^etagere: no proxy answers at http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\): start one, or give its admin port with --admin URL$`,
      ),
    );
  });

  it('a bad ADMIN_PORT for cache stats names the variable (exit 2)', { timeout: 20_000 }, async () => {
    const cli = runCli(['cache', 'stats'], { ...ISOLATED, ADMIN_PORT: 'ninety' });
    const { code, lines } = await finished(cli);
    expect(code).toBe(2);
    expectOneLine(lines, /^etagere: invalid config \(environment\): ADMIN_PORT: must be a port number, 0-65535 \(admin\.port\) \(or give/);
  });
});

describe('etagere cache and purge need only the admin address', () => {
  let upstream: ScriptedUpstream;
  let proxy: TestProxy;
  beforeAll(async () => {
    upstream = await startJsonUpstream();
    proxy = await startTestProxy({ upstreams: [{ name: 'github', prefix: '/', url: upstream.url }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it(
    'with a config whose pool is invalid and a malformed ETAGERE_TOKENS, the admin address still comes from it',
    { timeout: 30_000 },
    async () => {
      const port = new URL(proxy.adminUrl).port;
      const config = file('admin-only.yaml', `admin: { port: ${port} }\npool: { tokens: [{ env: NOT_SET_ANYWHERE }] }\nupstreams: []\n`);
      const env = { ...ISOLATED, ETAGERE_TOKENS: 'alice:not-a-valid-entry', ETAGERE_APP_PRIVATE_KEY_FILE: '/nonexistent' };
      const stats = runCli(['cache', 'stats', '--config', config], env);
      const { code } = await finished(stats);
      expect(code, stats.stderr()).toBe(0);
      expect(stats.stdout()).toMatch(/^\d+ entr(y|ies) in L1/);
      const purged = runCli(['purge', '--prefix', '/repos/', '--json'], { ...env, ETAGERE_CONFIG: config });
      expect((await finished(purged)).code, purged.stderr()).toBe(0);
      expect(JSON.parse(purged.stdout())).toMatchObject({ prefix: '/repos', upstreams: ['github'] });
    },
  );
});
