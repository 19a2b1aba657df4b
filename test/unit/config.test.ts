import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../src/platform/config/load.js';

/** Temporary config files, removed after the file's tests. */
const tmpDirs: string[] = [];
afterAll(() => {
  for (const dir of tmpDirs) rmSync(dir, { recursive: true, force: true });
});

function tmpFile(content: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-config-'));
  tmpDirs.push(dir);
  const file = join(dir, 'config.yaml');
  writeFileSync(file, content);
  return file;
}

describe('config', () => {
  it('with no file and no env, fronts api.github.com on 127.0.0.1:8080 with admin on 127.0.0.1:9090', () => {
    const config = loadConfig({ env: {} });
    // Loopback by default: the Docker image and compose set HOST=0.0.0.0 themselves.
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8080, tls: null });
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 9090, allowed_hosts: [], token: null, open: false });
    expect(config.redis.url).toBeNull();
    expect(config.pool.tokens).toEqual([]);
    expect(config.upstreams).toHaveLength(1);
    expect(config.upstreams[0]).toMatchObject({
      name: 'github',
      prefix: '/',
      url: 'https://api.github.com',
      pass_through: false,
      token_pool: true,
    });
    expect(config.upstreams[0]!.cache.policy).toBe('max-age');
  });

  it('loads config/default.yaml to the same defaults', () => {
    const config = loadConfig({ file: 'config/default.yaml', env: {} });
    expect(config.upstreams[0]!.url).toBe('https://api.github.com');
    expect(config.listen.port).toBe(8080);
  });

  it('applies environment overrides', () => {
    const config = loadConfig({
      file: 'config/default.yaml',
      env: {
        PORT: '8181',
        ADMIN_PORT: '9191',
        REDIS_URL: 'redis://127.0.0.1:6379/1',
        ETAGERE_TOKENS: ' a1 , b2,,',
        UPSTREAM_URL: 'http://127.0.0.1:9100',
        LOG_LEVEL: 'debug',
        PUBLIC_URL: 'https://proxy.example',
      },
    });
    expect(config.listen.port).toBe(8181);
    expect(config.admin.port).toBe(9191);
    expect(config.redis.url).toBe('redis://127.0.0.1:6379/1');
    expect(config.pool.tokens).toEqual([{ value: 'a1' }, { value: 'b2' }]);
    expect(config.upstreams[0]!.url).toBe('http://127.0.0.1:9100');
    expect(config.log.level).toBe('debug');
    expect(config.public_url).toBe('https://proxy.example');
  });

  it('ETAGERE_CONFIG names the file when --config is absent', () => {
    const file = tmpFile('listen: {port: 7000}\n');
    expect(loadConfig({ env: { ETAGERE_CONFIG: file } }).listen.port).toBe(7000);
  });

  it('loads the demo example with two upstreams', () => {
    const config = loadConfig({ file: 'config/examples/demo.yaml', env: {} });
    expect(config.upstreams.map((u) => [u.name, u.prefix, u.cache.policy])).toEqual([
      ['github', '/', 'max-age'],
      ['cyclists', '/bicyclists', 'ttl'],
    ]);
  });

  it('loads the shared-cache example with UPSTREAM_URL', () => {
    const config = loadConfig({ file: 'config/examples/shared-cache.yaml', env: { UPSTREAM_URL: 'https://api.example.com' } });
    expect(config.upstreams[0]).toMatchObject({ url: 'https://api.example.com', pass_through: true });
    expect(config.upstreams[0]!.cache.policy).toBe('rfc9111');
  });

  it('has sane cache defaults', () => {
    const config = loadConfig({ env: {} });
    expect(config.cache).toEqual({ l1: true, max_bytes: 256 * 1024 * 1024, max_entry_bytes: 4 * 1024 * 1024, partition_secret: null });
    expect(config.redis).toMatchObject({
      url: null,
      cluster: null,
      key_prefix: 'etagere:',
      required: false,
      command_timeout_ms: 100,
      shared_tokens: true,
    });
    expect(config.upstreams[0]!.cache).toMatchObject({
      policy: 'max-age',
      stale_if_error_seconds: 86_400,
      stale_while_revalidate_seconds: 0,
      heuristic_fraction: 0,
    });
  });

  it('takes Redis from REDIS_URL or REDIS_CLUSTER_NODES, never both', () => {
    expect(loadConfig({ env: { REDIS_CLUSTER_NODES: '10.0.0.1:7000, 10.0.0.2:7000' } }).redis.cluster).toEqual([
      '10.0.0.1:7000',
      '10.0.0.2:7000',
    ]);
    expect(() => loadConfig({ env: { REDIS_URL: 'redis://x:6379', REDIS_CLUSTER_NODES: 'a:1' } })).toThrow(
      /REDIS_CLUSTER_NODES: give either url or cluster, not both \(redis\.cluster\)/,
    );
    expect(() => loadConfig({ env: { REDIS_URL: 'http://x' } })).toThrow(
      /REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL \(redis\.url\)/,
    );
    expect(() => loadConfig({ env: { REDIS_CLUSTER_NODES: 'nohost' } })).toThrow(
      /REDIS_CLUSTER_NODES: must be host:port \(redis\.cluster\[0\]\)/,
    );
  });

  const bad: Array<[string, Record<string, unknown>, string]> = [
    ['a port out of range', { listen: { port: 70000 } }, 'listen.port'],
    ['a non-URL upstream', { upstreams: [{ name: 'x', prefix: '/', url: 'not a url' }] }, 'upstreams[0].url'],
    ['a non-http upstream', { upstreams: [{ name: 'x', prefix: '/', url: 'ftp://h' }] }, 'upstreams[0].url'],
    ['a prefix without a slash', { upstreams: [{ name: 'x', prefix: 'api', url: 'http://h' }] }, 'upstreams[0].prefix'],
    ['an unknown key', { listen: { port: 1, colour: 'red' } }, 'listen'],
    ['a TLS certificate without its key', { listen: { tls: { cert_file: '/x.pem' } } }, 'listen.tls.key_file'],
    ['a TLS key without its certificate', { listen: { tls: { key_file: '/x.key' } } }, 'listen.tls.cert_file'],
    ['an unknown TLS key', { listen: { tls: { cert_file: '/x.pem', key_file: '/x.key', ca_file: '/ca' } } }, 'listen.tls'],
    ['an unknown top-level key', { upstream: [] }, '(root)'],
    [
      'ttl policy without ttl_seconds',
      { upstreams: [{ name: 'x', prefix: '/', url: 'http://h', cache: { policy: 'ttl' } }] },
      'upstreams[0].cache.ttl_seconds',
    ],
    [
      'an unknown policy',
      { upstreams: [{ name: 'x', prefix: '/', url: 'http://h', cache: { policy: 'forever' } }] },
      'upstreams[0].cache.policy',
    ],
    [
      'duplicate names',
      {
        upstreams: [
          { name: 'x', prefix: '/', url: 'http://h' },
          { name: 'x', prefix: '/b', url: 'http://h' },
        ],
      },
      'upstreams[1].name',
    ],
    [
      'duplicate prefixes',
      {
        upstreams: [
          { name: 'x', prefix: '/a/', url: 'http://h' },
          { name: 'y', prefix: '/a', url: 'http://h' },
        ],
      },
      'upstreams[1].prefix',
    ],
    ['no upstreams', { upstreams: [] }, 'upstreams'],
    ['a bad log level', { log: { level: 'loud' } }, 'log.level'],
    ['a short partition secret', { cache: { partition_secret: 'short' } }, 'cache.partition_secret'],
    [
      'a negative stale window',
      { upstreams: [{ name: 'x', prefix: '/', url: 'http://h', cache: { stale_if_error_seconds: -1 } }] },
      'upstreams[0].cache.stale_if_error_seconds',
    ],
  ];
  for (const [what, raw, key] of bad) {
    it(`rejects ${what}, naming ${key}`, () => {
      expect(() => parseConfig(raw)).toThrow(ConfigError);
      try {
        parseConfig(raw);
      } catch (err) {
        expect((err as Error).message).toContain(`${key}:`);
      }
    });
  }

  it('names the environment variable key when PORT is not a number', () => {
    expect(() => loadConfig({ env: { PORT: 'eighty' } })).toThrow(/listen\.port/);
  });

  it('reports unreadable files, invalid YAML and non-mapping YAML clearly', () => {
    expect(() => loadConfig({ file: '/nonexistent/etagere.yaml', env: {} })).toThrow(/cannot read config file/);
    expect(() => loadConfig({ file: tmpFile('listen: [1, 2\n'), env: {} })).toThrow(/not valid YAML/);
    expect(() => loadConfig({ file: tmpFile('- 1\n- 2\n'), env: {} })).toThrow(/mapping/);
  });

  it('treats an empty file as all defaults', () => {
    expect(loadConfig({ file: tmpFile(''), env: {} }).listen.port).toBe(8080);
  });

  describe('token pool and consumers', () => {
    it('ETAGERE_TOKENS takes "token" and "name=token" items', () => {
      const config = loadConfig({ file: 'config/default.yaml', env: { ETAGERE_TOKENS: 'ci=ghp_aaa, ghp_bbb=x==,ghp_ccc' } });
      expect(config.pool.tokens).toEqual([{ name: 'ci', value: 'ghp_aaa' }, { name: 'ghp_bbb', value: 'x==' }, { value: 'ghp_ccc' }]);
    });
    it('a tokens file adds one token per line, with comments and names', () => {
      const file = tmpFile('# pool\nbot-1=ghp_one\n\nghp_two\r\n');
      const config = loadConfig({ file: 'config/default.yaml', env: { ETAGERE_TOKENS_FILE: file } });
      expect(config.pool.tokens).toEqual([{ name: 'bot-1', value: 'ghp_one' }, { value: 'ghp_two' }]);
      expect(() => loadConfig({ file: 'config/default.yaml', env: { ETAGERE_TOKENS_FILE: '/nonexistent/etagere-tokens' } })).toThrow(
        /ETAGERE_TOKENS_FILE: cannot read \/nonexistent\/etagere-tokens: ENOENT \(pool\.tokens_file\)/,
      );
    });
    it('config entries may reference environment variables, and a missing one is named', () => {
      const file = tmpFile(
        'pool:\n  tokens:\n    - {name: ci, env: GH_CI}\nconsumers:\n  enabled: true\n  keys:\n    - {name: web, env: WEB_KEY}\n',
      );
      const config = loadConfig({ file, env: { GH_CI: 'ghp_secret1', WEB_KEY: 'k1' } });
      expect(config.pool.tokens).toEqual([{ name: 'ci', value: 'ghp_secret1' }]);
      expect(config.consumers.keys).toEqual([{ name: 'web', value: 'k1', weight: 1, max_per_hour: null, max_concurrency: null }]);
      expect(() => loadConfig({ file, env: { WEB_KEY: 'k1' } })).toThrow(/pool\.tokens\[0\]\.env: environment variable GH_CI is not set/);
    });
    it('every variable that is not set is named in one error, not one per run', () => {
      const file = tmpFile(
        'pool:\n  tokens: [{name: a, env: GH_A}, {name: b, env: GH_B}]\n  apps: [{name: ci, app_id: 7, private_key_env: APP_KEY}]\n' +
          'consumers: {enabled: true, keys: [{name: web, env: WEB_KEY}]}\n',
      );
      expect(() => loadConfig({ file, env: { GH_B: 'ghp_b' } })).toThrow(
        /^pool\.tokens\[0\]\.env: environment variable GH_A is not set; consumers\.keys\[0\]\.env: environment variable WEB_KEY is not set; pool\.apps\[0\]\.private_key_env: environment variable APP_KEY is not set$/,
      );
    });
    it.each([['lots'], ['0'], ['1.5'], ['257']])('WORKERS=%s says what workers takes, not "Invalid input"', (value) => {
      expect(() => loadConfig({ env: { WORKERS: value } })).toThrow(
        /^invalid config \(environment\): WORKERS: must be a whole number from 1 to 256, or "auto" \(one per CPU\) \(workers\)$/,
      );
    });
    it('no environment-derived key is reported as bare "Invalid input" or "Invalid URL"', () => {
      for (const env of [
        { ETAGERE_APP_ID: '7', ETAGERE_APP_INSTALLATIONS: 'lots' },
        { PUBLIC_URL: 'lots' },
        { UPSTREAM_URL: 'http://' },
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector' },
      ]) {
        let message = '';
        try {
          loadConfig({ env });
        } catch (err) {
          message = (err as Error).message;
        }
        expect(message, JSON.stringify(env)).toMatch(/^invalid config/);
        expect(message, JSON.stringify(env)).not.toMatch(/Invalid (input|URL)/);
      }
    });
    it('loads the token-pool example with its secrets from the environment', () => {
      const env = { GITHUB_TOKEN_CI_1: 'ghp_one', GITHUB_TOKEN_CI_2: 'ghp_two', ETAGERE_KEY_WEB: 'kw', ETAGERE_KEY_BATCH: 'kb' };
      const config = loadConfig({ file: 'config/examples/token-pool.yaml', env });
      expect(config.pool.tokens.map((t) => t.name)).toEqual(['ci-1', 'ci-2']);
      expect(config.consumers).toMatchObject({ enabled: true, unknown: 'reject' });
      expect(() => loadConfig({ file: 'config/examples/token-pool.yaml', env: {} })).toThrow(/GITHUB_TOKEN_CI_1 is not set/);
    });
    it('rejects bad tokens without repeating them', () => {
      const bad = (tokens: unknown[]) => () =>
        parseConfig({ pool: { tokens }, upstreams: [{ name: 'gh', prefix: '/', url: 'http://x', token_pool: true }] });
      let message = '';
      try {
        bad([{ value: 'has space-secret' }])();
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/pool\.tokens\[0\]\.value: must be 1-1024 printable characters/);
      expect(message).not.toContain('space-secret');
      expect(bad([{ value: 'same1' }, { value: 'same1' }])).toThrow(/pool\.tokens\[1\]: the same token as pool\.tokens\[0\]/);
      expect(
        bad([
          { name: 'a', value: 'x1' },
          { name: 'a', value: 'x2' },
        ]),
      ).toThrow(/pool\.tokens\[1\]\.name: duplicate token name "a"/);
    });
    it('needs an upstream that uses the pool, and keys when consumers are enabled', () => {
      expect(() => parseConfig({ pool: { tokens: [{ value: 't1' }] }, upstreams: [{ name: 'gh', prefix: '/', url: 'http://x' }] })).toThrow(
        /pool\.tokens: tokens are configured but no upstream has token_pool: true/,
      );
      expect(() => parseConfig({ consumers: { enabled: true }, upstreams: [{ name: 'gh', prefix: '/', url: 'http://x' }] })).toThrow(
        /consumers\.keys: consumers\.enabled needs at least one key/,
      );
      const config = parseConfig({ upstreams: [{ name: 'gh', prefix: '/', url: 'http://x' }] });
      expect(config.pool).toMatchObject({ equivalent: true, per_token_concurrency: 10, max_concurrency: 90, queue_timeout_ms: 10_000 });
      expect(config.consumers).toMatchObject({ enabled: false, unknown: 'reject' });
    });
  });
});
