/**
 * consumers.keys_file: consumer keys from a mounted Secret file, `name=key` lines, reloaded while
 * the proxy serves. The config names the consumers and their rights; the file gives their keys
 * (several per consumer while clients move to a new one). A bad file changes nothing.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { consumerKeysProblem, parseConsumerKeysFile } from '../../src/platform/config/keys-file.js';
import { ConfigError, consumerKeysFromFile, loadConfig } from '../../src/platform/config/load.js';
import { maskedConfig } from '../../src/platform/config/masked.js';
import { createLogger } from '../../src/platform/log/logger.js';
import { createMetrics } from '../../src/platform/metrics/registry.js';
import { consumerKeysOf, createConsumers } from '../../src/pool/consumers/consumers.js';
import { createConsumerKeysReloader } from '../../src/pool/consumers/keys-reload.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
function tmp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'etagere-keys-file-'));
  dirs.push(dir);
  return dir;
}

const WEB_OLD = 'web-key-0f1e2d3c4b5a';
const WEB_NEW = 'web-key-9a8b7c6d5e4f';
const CI = 'ci-key-123456789abc';
const CONFIG = `consumers:
  enabled: true
  keys:
    - name: web
      weight: 2
    - name: ci
      allow:
        - paths: [/repos/acme/**]
`;

function setup(keys: string): { file: string; configFile: string } {
  const dir = tmp();
  const file = join(dir, 'consumer-keys');
  writeFileSync(file, keys);
  const configFile = join(dir, 'etagere.yaml');
  writeFileSync(configFile, CONFIG);
  return { file, configFile };
}

describe('parsing a consumer keys file', () => {
  it('takes name=key lines, comments, blank lines and several keys for one consumer', () => {
    expect(parseConsumerKeysFile(`# keys\n\nweb=${WEB_OLD}\r\n web = ${WEB_NEW} \nci=${CI}\n`)).toEqual([
      { name: 'web', value: WEB_OLD, line: 3 },
      { name: 'web', value: WEB_NEW, line: 4 },
      { name: 'ci', value: CI, line: 5 },
    ]);
  });

  it.each([
    [`${WEB_OLD}\n`, /line 1: write "name=key"/],
    [`=${WEB_OLD}\n`, /line 1: write "name=key"/],
    [`web=\n`, /line 1: no key after "="/],
    [`web=${WEB_OLD} trailing\n`, /line 1: the key must be 1-1024 printable characters/],
    [`# ok\nw eb=${WEB_OLD}\n`, /line 2: the name before "="/],
    [`web=${'x'.repeat(1025)}\n`, /line 1: the key must be/],
  ])('hostile: %j is refused naming its line, never its text', (text, message) => {
    const problem = parseConsumerKeysFile(text);
    expect(typeof problem).toBe('string');
    expect(problem).toMatch(message);
    expect(problem).not.toContain(WEB_OLD);
  });

  it('hostile: a consumer the config does not list, or a key given twice, is refused', () => {
    const configured = [{ name: 'web' }, { name: 'ops', value: CI }];
    expect(consumerKeysProblem([{ name: 'admin', value: WEB_OLD, line: 1 }], configured)).toMatch(/line 1: no consumer "admin"/);
    expect(consumerKeysProblem([{ name: 'web', value: CI, line: 2 }], configured)).toBe(
      'consumer keys file line 2: the same key as consumers.keys[1] (value not shown)',
    );
    expect(
      consumerKeysProblem(
        [
          { name: 'web', value: WEB_OLD, line: 1 },
          { name: 'web', value: WEB_OLD, line: 3 },
        ],
        configured,
      ),
    ).toMatch(/line 3: the same key as line 1/);
  });
});

describe('loading consumers.keys_file', () => {
  it('gives the listed consumers their keys, each with its rights; check-config masks them', () => {
    const { file, configFile } = setup(`web=${WEB_OLD}\nweb=${WEB_NEW}\nci=${CI}\n`);
    const config = loadConfig({ file: configFile, env: { ETAGERE_CONSUMER_KEYS_FILE: file } });
    expect(config.consumers.keys_file).toBe(file);
    expect(consumerKeysFromFile(config).map((line) => line.name)).toEqual(['web', 'web', 'ci']);
    const consumers = createConsumers(consumerKeysOf(config.consumers.keys, consumerKeysFromFile(config)));
    expect(consumers.match(WEB_OLD)).toMatchObject({ kind: 'consumer', name: 'web' });
    expect(consumers.match(WEB_NEW)).toBe(consumers.match(WEB_OLD)); // one identity per consumer
    expect(consumers.match(CI)).toMatchObject({ kind: 'consumer', name: 'ci', scope: expect.anything() });
    expect(JSON.stringify(maskedConfig(config))).not.toContain(WEB_OLD);
  });

  it('hostile: a bad file is a config error naming the variable and the line, never a key', () => {
    const { file, configFile } = setup(`web=${WEB_OLD}\nroot=${CI}\n`);
    let message = '';
    try {
      loadConfig({ file: configFile, env: { ETAGERE_CONSUMER_KEYS_FILE: file } });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    expect(message).toMatch(/^ETAGERE_CONSUMER_KEYS_FILE: consumer keys file line 2: no consumer "root"/);
    expect(message).not.toContain(CI);
    expect(() => loadConfig({ file: configFile, env: { ETAGERE_CONSUMER_KEYS_FILE: join(tmp(), 'missing') } })).toThrow(
      /cannot read .*missing: ENOENT/,
    );
  });

  it('hostile: a consumer without value, env or keys file has no key: a config error naming it', () => {
    const { configFile } = setup('');
    expect(() => loadConfig({ file: configFile, env: {} })).toThrow(/consumers\.keys\[0\]\.value: consumer "web" has no key/);
  });
});

describe('reloading consumers.keys_file', () => {
  function reloading(initial: string) {
    const { file, configFile } = setup(initial);
    const config = loadConfig({ file: configFile, env: { ETAGERE_CONSUMER_KEYS_FILE: file } });
    const consumers = createConsumers(consumerKeysOf(config.consumers.keys, consumerKeysFromFile(config)));
    const lines: string[] = [];
    const metrics = createMetrics({ defaultMetrics: false });
    const reloader = createConsumerKeysReloader({
      file,
      configured: config.consumers.keys,
      initial: consumerKeysFromFile(config),
      consumers,
      log: createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } }),
      metrics,
    });
    const counted = async (result: string): Promise<number> =>
      (await metrics.consumerKeyReloads.get()).values.find((value) => value.labels.result === result)?.value ?? 0;
    return { file, consumers, reloader, lines, counted };
  }

  it('swaps the keys at once: a removed key matches nothing, also on a connection where it matched', async () => {
    const { file, consumers, reloader, lines, counted } = reloading(`web=${WEB_OLD}\nci=${CI}\n`);
    const connection = {};
    expect(consumers.match(WEB_OLD, connection)).toMatchObject({ name: 'web' });
    expect(consumers.inAuthorization(`token ${WEB_OLD}`, connection)).toMatchObject({ name: 'web' });
    writeFileSync(file, `web=${WEB_NEW}\nci=${CI}\n`);
    expect(reloader.reload('file')).toEqual({ result: 'ok', changed: ['web'] });
    expect(consumers.match(WEB_OLD, connection)).toEqual({ kind: 'unknown' });
    expect(consumers.inAuthorization(`token ${WEB_OLD}`, connection)).toEqual({ kind: 'none' });
    expect(consumers.match(WEB_NEW, connection)).toMatchObject({ name: 'web' });
    expect(consumers.match(CI)).toMatchObject({ name: 'ci' });
    expect(reloader.reload('file')).toEqual({ result: 'unchanged' });
    expect(await counted('ok')).toBe(1);
    const logged = lines.join('');
    expect(logged).toContain('consumer keys reloaded');
    expect(logged).not.toContain(WEB_NEW);
    expect(logged).not.toContain(WEB_OLD);
  });

  it.each([
    ['a malformed line', `web=${WEB_NEW}\n${CI}\n`, /line 2: write "name=key"/],
    ['an unknown consumer', `web=${WEB_NEW}\nintruder=${CI}\n`, /line 2: no consumer "intruder"/],
    ['one key for two consumers', `web=${CI}\nci=${CI}\n`, /line 2: the same key as line 1/],
    ['an emptied file', '# being rewritten\n', /the file has no keys \(it had 2\): taken for a write in progress/],
  ])('hostile: %s keeps the old keys, logs why by line and counts a failed reload', async (_what, text, why) => {
    const { file, consumers, reloader, lines, counted } = reloading(`web=${WEB_OLD}\nci=${CI}\n`);
    writeFileSync(file, text);
    const outcome = reloader.reload('file');
    expect(outcome).toMatchObject({ result: 'failed', why: expect.stringMatching(why) });
    expect(consumers.match(WEB_OLD)).toMatchObject({ name: 'web' });
    expect(consumers.match(CI)).toMatchObject({ name: 'ci' });
    expect(consumers.match(WEB_NEW)).toEqual({ kind: 'unknown' });
    expect(await counted('failed')).toBe(1);
    expect(lines.join('')).toContain('consumer keys reload failed: keeping the current keys');
    for (const secret of [WEB_OLD, WEB_NEW, CI]) expect(lines.join('')).not.toContain(secret);
  });

  it('hostile: an unreadable file keeps the old keys', () => {
    const { file, consumers, reloader } = reloading(`web=${WEB_OLD}\nci=${CI}\n`);
    rmSync(file);
    expect(reloader.reload('signal')).toMatchObject({ result: 'failed', why: expect.stringMatching(/cannot read .*ENOENT/) });
    expect(consumers.match(WEB_OLD)).toMatchObject({ name: 'web' });
  });
});
