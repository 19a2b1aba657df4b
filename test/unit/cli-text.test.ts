/**
 * Pure parts of the command line: which config key each environment variable sets (so errors name
 * the variable), the masked config `etagere check-config` prints, and the text the admin commands
 * print, which never passes a terminal escape sequence through from what a proxy answered.
 */
import { describe, expect, it } from 'vitest';
import { answerError, inspectText, purgeText, statsText, table } from '../../src/main/cli-admin.js';
import { ENV_VARS, applyEnv, envKey, loadAdminConfig, parseConfig } from '../../src/platform/config/load.js';
import { MASK, maskedConfig } from '../../src/platform/config/masked.js';

/** The value at a key path such as `pool.apps[0].private_key_file` of a raw config. */
function at(raw: unknown, key: string): unknown {
  return key.split(/\.|(?=\[)/).reduce<unknown>((node, part) => {
    if (node === null || typeof node !== 'object') return undefined;
    const index = /^\[(\d+)\]$/.exec(part);
    return index !== null ? (node as unknown[])[Number(index[1])] : (node as Record<string, unknown>)[part];
  }, raw);
}

describe('environment variables and the keys they set', () => {
  it.each(Object.keys(ENV_VARS).filter((name) => name !== 'ETAGERE_CONFIG'))('%s sets the key its description names', (name) => {
    const key = envKey(name as keyof typeof ENV_VARS);
    expect(key).toMatch(/^[a-z_]/);
    const shaped: Record<string, string> = { REDIS_CLUSTER_NODES: 'h:1', OTEL_RESOURCE_ATTRIBUTES: 'team=x' };
    const value = name.endsWith('_ID') || name.endsWith('PORT') ? '7' : (shaped[name] ?? 'x');
    const env: Record<string, string> = { [name]: value };
    if (name.startsWith('ETAGERE_APP_')) env.ETAGERE_APP_ID = '7';
    const raw = applyEnv({ upstreams: [{ name: 'github', prefix: '/', url: 'https://api.github.com' }] }, env);
    expect(at(raw, key!), JSON.stringify(raw)).toBeDefined();
  });

  it('ETAGERE_CONFIG names a file, not a key', () => {
    expect(envKey('ETAGERE_CONFIG')).toBeUndefined();
  });

  it('the admin address alone: other keys and variables are neither read nor checked', () => {
    const env = { ADMIN_PORT: '9191', ETAGERE_TOKENS: 'a:b', ETAGERE_APP_PRIVATE_KEY_FILE: '/nonexistent', PORT: 'eighty' };
    expect(loadAdminConfig({ env }).admin).toMatchObject({ host: '127.0.0.1', port: 9191 });
    expect(() => loadAdminConfig({ env: { ADMIN_PORT: 'x' } })).toThrow(
      /^invalid config \(environment\): ADMIN_PORT: must be a port number, 0-65535 \(admin\.port\)$/,
    );
  });
});

describe('the masked config', () => {
  const SECRET = 'hunter2_masked_secret_0123456789';
  const config = parseConfig({
    upstreams: [{ name: 'gh', prefix: '/', url: `https://${SECRET}@api.example.com/base?token=${SECRET}&a=${SECRET}`, token_pool: true }],
    pool: { tokens: [{ name: 'ci', value: SECRET }, { value: `${SECRET}2` }] },
    consumers: { enabled: true, keys: [{ name: 'web', value: `${SECRET}3` }] },
    webhooks: { secret: `${SECRET}4` },
    cache: { partition_secret: `${SECRET}5` },
    redis: { url: `rediss://default:${SECRET}@r.example:6380/1` },
  });

  it('keeps names and addresses, masks every value', () => {
    const masked = maskedConfig(config);
    const text = JSON.stringify(masked);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('hunter2');
    expect(at(masked, 'pool.tokens[0]')).toEqual({ name: 'ci', value: MASK });
    expect(at(masked, 'consumers.keys[0].name')).toBe('web');
    expect(at(masked, 'redis.url')).toBe('rediss://default:***@r.example:6380/1');
    expect(at(masked, 'upstreams[0].url')).toBe('https://***@api.example.com/base?token=***&a=***');
    expect(at(masked, 'listen.port')).toBe(8080);
    expect(config.pool.tokens[0]!.value).toBe(SECRET); // a copy: the config itself is untouched
  });
});

describe('admin answers as text', () => {
  const ESC = '\u001b';
  it('a table aligns its columns, numbers to the right, and shows control characters instead of sending them', () => {
    const text = table(
      ['N', 'PATH'],
      [
        [5, '/a'],
        [120, `/b${ESC}[2J\u0007`],
      ],
    );
    expect(text.split('\n')).toEqual(['  N  PATH', '  5  /a', '120  /b\\x1b[2J\\x07']);
    expect(text).not.toContain(ESC);
  });

  it('purge, inspect and stats answers read as text; a hostile answer sends no escape sequence', () => {
    expect(purgeText({ upstreams: ['github'], prefix: '/repos/o', marked: 1, replicas: 'this process' })).toBe(
      'marked 1 entry stale under prefix /repos/o, upstreams github; purge sent to this process\n',
    );
    const entry = {
      upstream: 'github',
      path: `/x${ESC}]0;pwned\u0007`,
      query: '',
      partition: 'pool',
      status: 200,
      age: 1,
      ttl: 59,
      size: 10,
      etag: '"e"',
      accept: null,
      fetched_by: 'ci',
    };
    const inspected = inspectText({ path: '/x', entries: [{ ...entry, body: `line1\n${ESC}[31mred`, body_encoding: 'utf8' }], note: 'L1' });
    expect(inspected).not.toContain(ESC);
    expect(inspected).toContain('--- entry 1 body\nline1\n\\x1b[31mred');
    expect(inspectText({ path: '/none', entries: [], note: 'L1 only' })).toBe('no entry for /none\nL1 only\n');
    const stats = statsText({
      entries: 2,
      bytes: 2048,
      marked_scopes: 0,
      top_by_hits: [],
      top_by_upstream: [{ upstream: 'github', path: '/x', hits: 1, upstream_requests: 3, quota_spent: 3 }],
    });
    expect(stats).toContain('2 entries in L1, 2.0 KiB, 0 marked scopes\n');
    expect(stats).toContain('busiest paths by hits\n(none yet)');
    expect(answerError({ status: 404, body: JSON.stringify({ message: `unknown upstream${ESC}[2J` }) })).toBe(
      'the admin port answered 404: unknown upstream\\x1b[2J',
    );
    expect(answerError({ status: 502, body: '<html>\nbad gateway' })).toBe('the admin port answered 502: <html>');
  });
});
