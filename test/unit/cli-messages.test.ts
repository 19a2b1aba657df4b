/**
 * What a newcomer reads (pure parts): token-entry validation that names the position and
 * never the value, the help texts, the start-up summary, and the 502 message naming the host.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMANDS, USAGE, commandHelp, version } from '../../src/main/cli-help.js';
import { ConfigError, ENV_VARS, loadConfig, parseConfig } from '../../src/platform/config/load.js';
import { startupSummary, withoutCredentials } from '../../src/platform/config/summary.js';
import { demoBanner } from '../../src/main/demo-banner.js';
import { fakeUpstreamFlags } from '../../fake-github/index.js';
import { errors } from '../../src/http/errors.js';

const SECRET = 'ghp_newcomerSecret0123456789';

function configError(env: Record<string, string>): string {
  try {
    loadConfig({ env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('no ConfigError');
}

describe('token entries', () => {
  it.each([
    ['alice=', /ETAGERE_TOKENS entry 2: no token after "="/],
    [`=${SECRET}`, /ETAGERE_TOKENS entry 2: nothing before "="/],
    [`alice:${SECRET}`, /ETAGERE_TOKENS entry 2: the token contains ":"/],
    [`${SECRET}@alice:repo`, /ETAGERE_TOKENS entry 2: the token contains ":"/],
    [`bad name=${SECRET}`, /ETAGERE_TOKENS entry 2: the name before "="/],
  ])('a malformed entry %#: an error naming its position, never its value', (entry, message) => {
    const text = configError({ ETAGERE_TOKENS: `ok=ghp_fine0123,${entry}` });
    expect(text).toMatch(message);
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain('alice');
  });

  it('a bad line of the tokens file: its line number, never its content', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'etagere-tokens-')), 'tokens');
    writeFileSync(file, `# pool\nbot-1=ghp_one\nbot-2:${SECRET}\n`);
    const text = configError({ ETAGERE_TOKENS_FILE: file });
    expect(text).toMatch(/^tokens file line 3: the token contains ":"/);
    expect(text).not.toContain(SECRET);
  });

  it('good entries still load: names, bare tokens, "=" inside a token, blanks skipped', () => {
    const config = loadConfig({ env: { ETAGERE_TOKENS: ` ci=ghp_a ,, ghp_b , bot.2=x==` } });
    expect(config.pool.tokens).toEqual([{ name: 'ci', value: 'ghp_a' }, { value: 'ghp_b' }, { name: 'bot.2', value: 'x==' }]);
  });
});

describe('help and version', () => {
  it('the usage names every environment variable and every command', () => {
    for (const name of Object.keys(ENV_VARS)) expect(USAGE).toContain(name);
    for (const command of COMMANDS) expect(USAGE).toContain(command);
    expect(USAGE).toContain('--version');
  });

  it('the environment table appears once, under etagere --help', () => {
    for (const name of Object.keys(ENV_VARS)) expect(USAGE.match(new RegExp(`^  ${name} `, 'gm')), name).toHaveLength(1);
    for (const command of COMMANDS)
      for (const name of Object.keys(ENV_VARS))
        expect(commandHelp(command), `${command} ${name}`).not.toMatch(new RegExp(`^  ${name} `, 'm'));
  });

  it("each command's help lists that command's flags", () => {
    for (const flag of ['-c, --config', '--port', '--host', '--admin-port']) expect(commandHelp('serve')).toContain(`  ${flag} `);
    expect(commandHelp('check-config')).toContain('  -c, --config FILE ');
    for (const flag of ['--port', '--fake-port', '--admin-port', '--quiet', '--verbose']) expect(commandHelp('demo')).toContain(flag);
    for (const { flag } of fakeUpstreamFlags) expect(commandHelp('fake-upstream')).toContain(flag);
  });

  it('demo --help does not mention --config: the demo runs its own config', () => {
    expect(commandHelp('demo')).not.toContain('--config');
    expect(commandHelp('demo')).not.toContain('ETAGERE_CONFIG');
  });

  it("the version is package.json's", () => {
    expect(version()).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('start-up summary', () => {
  it('names upstreams by name and URL, counts tokens, and shows no credential', () => {
    const config = parseConfig({
      upstreams: [{ name: 'github', prefix: '/', url: `https://user:${SECRET}@api.example.com/api/v3?token=${SECRET}`, token_pool: true }],
      pool: { tokens: [{ name: 'a', value: SECRET }] },
      redis: { url: `redis://:${SECRET}@redis.internal:6379/0` },
    });
    const summary = startupSummary(config);
    expect(JSON.stringify(summary)).not.toContain(SECRET);
    expect(summary.upstreams).toEqual(['github / -> https://api.example.com/api/v3']);
    expect(summary.pool).toBe('1 pool token');
    expect(summary.redis).toBe('redis://redis.internal:6379/0');
    expect(summary.public_url).toMatch(/^none/);
    const bare = startupSummary(loadConfig({ env: {} }));
    expect(bare.pool).toMatch(/^anonymous/);
    expect(bare.redis).toMatch(/^none/);
    expect(bare.upstreams).toEqual(['github / -> https://api.github.com']);
    expect(withoutCredentials('not a url')).toBe('(not a URL)');
  });
});

describe('errors', () => {
  it('502 and 504 name the upstream and its host, never its credentials or query', () => {
    const cfg = { name: 'github', url: `https://user:${SECRET}@api.github.com:8443/base?access_token=${SECRET}` };
    const failure = { status: 502, detail: 'ECONNREFUSED' } as const;
    const bad = errors.upstreamFailed(cfg, failure);
    expect(bad.message).toBe('Bad Gateway: upstream "github" (api.github.com:8443) failed (ECONNREFUSED)');
    const slow = errors.upstreamFailed(cfg, { status: 504, detail: 'headers timeout' });
    expect(slow.message).toContain('"github" (api.github.com:8443)');
    for (const reply of [bad, slow, errors.internal(cfg)]) expect(reply.message).not.toContain(SECRET);
  });
});

describe('demo banner', () => {
  it('shows every URL, the status page included', () => {
    const banner = demoBanner({ url: 'http://127.0.0.1:8080', adminUrl: 'http://127.0.0.1:9090' }, 'http://127.0.0.1:9100');
    for (const url of ['http://127.0.0.1:8080', '/metrics', '/healthz', '/readyz', '/admin/tokens', '/admin/status', '/__fake/stats'])
      expect(banner).toContain(url);
    expect(banner).toMatch(/status page +http:\/\/127\.0\.0\.1:9090\//);
  });

  it("matches the README's example output", () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const banner = demoBanner({ url: 'http://127.0.0.1:8080', adminUrl: 'http://127.0.0.1:9090' }, 'http://127.0.0.1:9100');
    expect(readme).toContain(banner.trim());
    const block = /```\n(requests \d+ .*\n)+```/.exec(readme);
    expect(block, 'the README shows summary lines').not.toBeNull();
    for (const line of block![0].split('\n').slice(1, -1))
      expect(line).toMatch(/^requests \d+ \| hit ratio \d+\.\d % \| quota saved \d+ \| alice-public \d+\/5000 \| bob-public \d+\/5000$/);
    expect(readme).not.toMatch(/"msg":"request"/);
  });
});
