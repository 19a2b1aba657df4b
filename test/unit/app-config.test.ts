/**
 * pool.apps and the ETAGERE_APP_* shortcut: the App's key is read at load time from a file or a
 * variable, and an unreadable or non-PEM key is a config error that names the key and never shows
 * its content (the CLI exits 2 on it).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/platform/config/load.js';
import { testAppKeys } from '../helpers/apps.js';
import { runCli } from '../helpers/cli.js';

const keys = testAppKeys('unit/app-config');
const dir = mkdtempSync(join(tmpdir(), 'etagere-app-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

const keyFile = file('app.pem', keys.privateKey);

/** The ConfigError a load throws (the test fails when it does not throw one). */
function loadError(opts: Parameters<typeof loadConfig>[0]): string {
  try {
    loadConfig(opts);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error('the config loaded');
}

function expectNoKeyIn(text: string): void {
  for (const line of keys.secretLines) expect(text).not.toContain(line);
  expect(text).not.toContain('PRIVATE KEY-----');
}

describe('pool.apps', () => {
  it('ETAGERE_APP_ID, ETAGERE_APP_PRIVATE_KEY_FILE and ETAGERE_APP_INSTALLATIONS define one App named "app"', () => {
    const config = loadConfig({
      env: { ETAGERE_APP_ID: '123456', ETAGERE_APP_PRIVATE_KEY_FILE: keyFile, ETAGERE_APP_INSTALLATIONS: '1001, 1002' },
    });
    expect(config.pool.apps).toHaveLength(1);
    const [app] = config.pool.apps;
    expect(app).toMatchObject({ name: 'app', app_id: 123456, private_key_file: keyFile, installations: [1001, 1002] });
    expect(app!.private_key).toBe(keys.privateKey);
    expect(loadConfig({ env: { ETAGERE_APP_ID: '7', ETAGERE_APP_PRIVATE_KEY_FILE: keyFile } }).pool.apps[0]!.installations).toBe('all');
    expect(
      loadConfig({ env: { ETAGERE_APP_ID: '7', ETAGERE_APP_PRIVATE_KEY_FILE: keyFile, ETAGERE_APP_INSTALLATIONS: 'all' } }).pool.apps[0]!
        .installations,
    ).toBe('all');
  });

  it('reads the YAML form, the key from a file or from a variable (a one-line PEM with \\n unfolded)', () => {
    const yaml = file(
      'apps.yaml',
      [
        'pool:',
        '  apps:',
        '    - {name: ci-app, app_id: 11, private_key_file: ' + JSON.stringify(keyFile) + ', installations: all}',
        '    - {name: docs-app, app_id: 12, private_key_env: DOCS_APP_KEY, installations: [5, 6]}',
      ].join('\n'),
    );
    const config = loadConfig({ file: yaml, env: { DOCS_APP_KEY: keys.privateKey.trim().replace(/\n/g, '\\n') } });
    expect(config.pool.apps.map((app) => [app.name, app.installations])).toEqual([
      ['ci-app', 'all'],
      ['docs-app', [5, 6]],
    ]);
    expect(config.pool.apps[1]!.private_key!.trim()).toBe(keys.privateKey.trim());
  });

  it.each([
    [
      'an unreadable file',
      { ETAGERE_APP_ID: '1', ETAGERE_APP_PRIVATE_KEY_FILE: join(dir, 'missing.pem') },
      /^ETAGERE_APP_PRIVATE_KEY_FILE: cannot read .*missing\.pem: ENOENT \(pool\.apps\[0\]\.private_key_file\)$/,
    ],
    [
      'a public key',
      { ETAGERE_APP_ID: '1', ETAGERE_APP_PRIVATE_KEY_FILE: file('public.pem', keys.publicKey) },
      /^ETAGERE_APP_PRIVATE_KEY_FILE: not the App's private key: .*\(content not shown\) \(pool\.apps\[0\]\.private_key_file\)$/,
    ],
    [
      'a damaged key',
      { ETAGERE_APP_ID: '1', ETAGERE_APP_PRIVATE_KEY_FILE: file('cut.pem', keys.privateKey.slice(0, 600)) },
      /ETAGERE_APP_PRIVATE_KEY_FILE: not the App's private key/,
    ],
    [
      'no key at all',
      { ETAGERE_APP_ID: '1' },
      /ETAGERE_APP_ID: give private_key_file or private_key_env \(pool\.apps\[0\]\.private_key_file\)/,
    ],
    ['a key file without an App id', { ETAGERE_APP_PRIVATE_KEY_FILE: keyFile }, /need ETAGERE_APP_ID/],
    ['a bad App id', { ETAGERE_APP_ID: 'ci-app', ETAGERE_APP_PRIVATE_KEY_FILE: keyFile }, /pool\.apps\[0\]\.app_id/],
    [
      'a bad installation id',
      { ETAGERE_APP_ID: '1', ETAGERE_APP_PRIVATE_KEY_FILE: keyFile, ETAGERE_APP_INSTALLATIONS: '5,x' },
      /pool\.apps\[0\]\.installations/,
    ],
  ])('refuses %s, naming the key and not the content', (_name, env, message) => {
    const error = loadError({ env });
    expect(error).toMatch(message);
    expectNoKeyIn(error);
  });

  it('refuses a missing variable, two sources, a duplicate name, and Apps without a pooled upstream', () => {
    const yaml = (apps: string, upstreams = ''): string =>
      file(`case-${Math.random().toString(36).slice(2)}.yaml`, `pool:\n  apps:\n${apps}\n${upstreams}`);
    expect(loadError({ file: yaml('    - {name: a, app_id: 1, private_key_env: NOT_SET_HERE}'), env: {} })).toMatch(
      /pool\.apps\[0\]\.private_key_env: environment variable NOT_SET_HERE is not set/,
    );
    expect(
      loadError({
        file: yaml(`    - {name: a, app_id: 1, private_key_env: K, private_key_file: ${JSON.stringify(keyFile)}}`),
        env: { K: keys.privateKey },
      }),
    ).toMatch(/pool\.apps\[0\]: give only one of/);
    const twice = `    - {name: a, app_id: 1, private_key_file: ${JSON.stringify(keyFile)}}\n    - {name: a, app_id: 2, private_key_file: ${JSON.stringify(keyFile)}}`;
    expect(loadError({ file: yaml(twice), env: {} })).toMatch(/pool\.apps\[1\]\.name: duplicate App name "a"/);
    const unpooled = yaml(
      `    - {name: a, app_id: 1, private_key_file: ${JSON.stringify(keyFile)}}`,
      'upstreams:\n  - {name: gh, prefix: /, url: "https://api.github.com"}',
    );
    expect(loadError({ file: unpooled, env: {} })).toMatch(/pool\.apps: GitHub Apps are configured but no upstream has token_pool: true/);
    // A pool of Apps fails closed off loopback like a pool of tokens.
    expect(loadError({ env: { ETAGERE_APP_ID: '1', ETAGERE_APP_PRIVATE_KEY_FILE: keyFile, HOST: '0.0.0.0' } })).toMatch(
      /HOST: is 0\.0\.0\.0.*\(listen\.host\)/,
    );
    // An inline private_key that is not a key is named too, its content not shown.
    const inline = loadError({
      file: yaml('    - {name: a, app_id: 1, private_key: "-----BEGIN RSA PRIVATE KEY-----\\nabc\\n-----END RSA PRIVATE KEY-----"}'),
      env: {},
    });
    expect(inline).toMatch(/pool\.apps\[0\]\.private_key: is not an RSA private key in PEM form \(content not shown\)/);
    expect(inline).not.toContain('abc');
  });

  it('refuses a pool token named like an installation of an App ("<app>-<id>"), which would hide it', () => {
    const env = {
      ETAGERE_APP_ID: '1',
      ETAGERE_APP_PRIVATE_KEY_FILE: keyFile,
      ETAGERE_TOKENS: 'app-1001=ghp_app_config_clash_token_1,app-x=other_clash_token_2',
    };
    const message = loadError({ env });
    expect(message).toMatch(/ETAGERE_TOKENS: "app-1001" is how GitHub App app's installations are named.*\(pool\.tokens\[0\]\.name\)/);
    expect(message).not.toMatch(/pool\.tokens\[1\]/); // "app-x" is no installation's name
    expect(message).not.toContain('clash_token');
  });

  it('etagere serve exits 2 on a key that is not a private key, and prints no key', async () => {
    const cli = runCli(['serve'], {
      ETAGERE_APP_ID: '123',
      ETAGERE_APP_PRIVATE_KEY_FILE: file('wrong.pem', keys.publicKey),
      ETAGERE_CONFIG: '',
    });
    const { code } = await cli.exited;
    expect(code).toBe(2);
    expect(cli.stderr()).toMatch(/ETAGERE_APP_PRIVATE_KEY_FILE: not the App's private key.*\(pool\.apps\[0\]\.private_key_file\)/);
    expectNoKeyIn(cli.stdout() + cli.stderr());
  });
});
