/**
 * The webhook settings: the secret from the config, the environment or a file, never
 * repeated in a message; `cache.webhook_fresh_seconds` only with the receiver, its owners and a
 * policy it can extend; the start-up line says whether the receiver is on, never its secret.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../src/platform/config/load.js';
import { startupSummary } from '../../src/platform/config/summary.js';
import { COMMANDS, USAGE, commandHelp } from '../../src/main/cli-help.js';
import { testSecret } from '../helpers/secrets.js';

const SECRET = testSecret('webhook secret of the config test', 'config-test-webhook-secret-0123');
const upstream = (cache: Record<string, unknown> = {}) => ({ name: 'github', prefix: '/', url: 'https://api.github.com', cache });

/** The message of the ConfigError `run` throws. */
function problem(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error('no ConfigError');
}

describe('webhook configuration', () => {
  it('is off by default, with GitHub-sized defaults', () => {
    const config = parseConfig({ upstreams: [upstream()] });
    expect(config.webhooks).toEqual({
      path: '/_etagere/webhooks/github',
      secret: null,
      secret_file: null,
      max_body_bytes: 26_214_400,
      read_timeout_ms: 10_000,
      owners: [],
    });
    expect(config.upstreams[0]!.cache.webhook_fresh_seconds).toBe(0);
    expect(startupSummary(config).webhooks).toBe('off (no secret)');
  });

  it('takes the secret from ETAGERE_WEBHOOK_SECRET or a file (a trailing newline dropped), never both', () => {
    const fromEnv = loadConfig({ env: { ETAGERE_WEBHOOK_SECRET: SECRET } });
    expect(fromEnv.webhooks.secret).toBe(SECRET);
    expect(JSON.stringify(startupSummary(fromEnv))).not.toContain(SECRET);
    expect(startupSummary(fromEnv).webhooks).toBe('on at /_etagere/webhooks/github');
    const dir = mkdtempSync(join(tmpdir(), 'etagere-webhook-'));
    const file = join(dir, 'secret');
    writeFileSync(file, `${SECRET}\n`);
    expect(loadConfig({ env: { ETAGERE_WEBHOOK_SECRET_FILE: file } }).webhooks.secret).toBe(SECRET);
    const both = problem(() => loadConfig({ env: { ETAGERE_WEBHOOK_SECRET: SECRET, ETAGERE_WEBHOOK_SECRET_FILE: file } }));
    expect(both).toMatch(/give the secret once/);
    const missing = problem(() => loadConfig({ env: { ETAGERE_WEBHOOK_SECRET_FILE: join(dir, 'nope') } }));
    expect(missing).toMatch(/ETAGERE_WEBHOOK_SECRET_FILE: cannot read .*ENOENT \(webhooks\.secret_file\)/);
    writeFileSync(file, '\n');
    expect(problem(() => loadConfig({ env: { ETAGERE_WEBHOOK_SECRET_FILE: file } }))).toMatch(/is empty/);
  });

  it('refuses a short secret or a bad path, naming the key and never the value', () => {
    const short = 'short-secret';
    const message = problem(() => parseConfig({ upstreams: [upstream()], webhooks: { secret: short } }));
    expect(message).toMatch(/webhooks\.secret: must be 16-4096 characters/);
    expect(message).not.toContain(short);
    for (const path of ['no-slash', '/trailing/', '/with?query', '/a b'])
      expect(problem(() => parseConfig({ upstreams: [upstream()], webhooks: { secret: SECRET, path } }))).toMatch(/webhooks\.path/);
    expect(problem(() => parseConfig({ upstreams: [upstream()], webhooks: { owners: ['a/b'] } }))).toMatch(/webhooks\.owners\[0\]/);
    expect(problem(() => parseConfig({ upstreams: [upstream()], webhooks: { max_body_bytes: 30_000_000 } }))).toMatch(
      /webhooks\.max_body_bytes/,
    );
  });

  it('takes a read deadline between 1 and 60 seconds, and names the key otherwise', () => {
    expect(parseConfig({ upstreams: [upstream()], webhooks: { read_timeout_ms: 2_500 } }).webhooks.read_timeout_ms).toBe(2_500);
    for (const read_timeout_ms of [0, 999, 60_001, 1.5, '10000'])
      expect(problem(() => parseConfig({ upstreams: [upstream()], webhooks: { read_timeout_ms } }))).toMatch(/webhooks\.read_timeout_ms/);
  });

  it('webhook_fresh_seconds needs the receiver, the owners, and a policy it can extend', () => {
    const fresh = upstream({ webhook_fresh_seconds: 600 });
    expect(problem(() => parseConfig({ upstreams: [fresh], webhooks: { owners: ['my-org'] } }))).toMatch(
      /upstreams\[0\]\.cache\.webhook_fresh_seconds: needs the webhook receiver/,
    );
    expect(problem(() => parseConfig({ upstreams: [fresh], webhooks: { secret: SECRET } }))).toMatch(/webhooks\.owners: name the accounts/);
    expect(
      problem(() =>
        parseConfig({
          upstreams: [upstream({ policy: 'revalidate', webhook_fresh_seconds: 600 })],
          webhooks: { secret: SECRET, owners: ['*'] },
        }),
      ),
    ).toMatch(/webhook_fresh_seconds: needs policy "max-age" or "ttl"/);
    const ok = parseConfig({ upstreams: [fresh], webhooks: { secret: SECRET, owners: ['my-org', '*'] } });
    expect(ok.upstreams[0]!.cache.webhook_fresh_seconds).toBe(600);
  });
});

describe('the help of purge and cache', () => {
  it('lists the commands and every flag', () => {
    expect(COMMANDS).toEqual(expect.arrayContaining(['purge', 'cache']));
    expect(USAGE).toMatch(/purge --prefix P/);
    for (const flag of ['--path', '--prefix', '--upstream', '--admin', '--config']) expect(commandHelp('purge')).toContain(flag);
    for (const flag of ['inspect', 'stats', '--body', '--top', '--upstream', '--admin', '--config'])
      expect(commandHelp('cache')).toContain(flag);
    for (const flag of ['--webhook-url', '--webhook-secret']) expect(commandHelp('fake-upstream')).toContain(flag);
  });
});

describe('config/examples/webhooks.yaml', () => {
  it('loads with the secret from the environment, and says what it needs without it', () => {
    const config = loadConfig({ file: 'config/examples/webhooks.yaml', env: { ETAGERE_WEBHOOK_SECRET: SECRET } });
    expect(config.webhooks.owners).toEqual(['my-org']);
    expect(config.upstreams[0]!.cache.webhook_fresh_seconds).toBe(600);
    expect(problem(() => loadConfig({ file: 'config/examples/webhooks.yaml', env: {} }))).toMatch(/needs the webhook receiver/);
  });
});
