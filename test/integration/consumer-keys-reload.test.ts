/**
 * Consumer keys from a mounted Secret file (consumers.keys_file, ETAGERE_CONSUMER_KEYS_FILE) with
 * the real CLI: an edit of the file (as the kubelet swaps a Secret's files) changes the keys
 * without a restart; a key taken out stops working at once, on a keep-alive connection that used
 * it too; a bad file keeps the old keys; SIGHUP reloads too. Logs name consumers, never keys.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { logLines, serveCli, type ServedCli } from '../helpers/cli.js';
import { get } from '../helpers/http.js';
import { until } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';

const OLD = testSecret('consumer key (old) of the keys-reload test', 'keys-reload-old-3b9d2e71');
const NEW = testSecret('consumer key (new) of the keys-reload test', 'keys-reload-new-5c0a8f44');
const CI = testSecret('consumer key (ci) of the keys-reload test', 'keys-reload-ci-7e1f6a93');

describe('consumers.keys_file with the CLI: keys change without a restart', () => {
  let fake: FakeUpstream;
  let dir: string;
  let keys: string;
  let proxy: ServedCli;
  let client: Client;

  /** Writes the file the way Kubernetes and editors do: a new file renamed over the old one. */
  const writeKeys = (text: string): void => {
    writeFileSync(`${keys}.new`, text);
    renameSync(`${keys}.new`, keys);
  };
  /** A request on the one keep-alive connection of `client`. */
  const status = async (key: string): Promise<number> => {
    const res = await client.request({ method: 'GET', path: '/repos/octocat/hello-world', headers: { 'x-etagere-key': key } });
    await res.body.dump();
    return res.statusCode;
  };
  const reloads = (message: RegExp): number => logLines(proxy.cli).filter((line) => message.test(String(line.msg))).length;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'etagere-keys-reload-'));
    keys = join(dir, 'consumer-keys');
    writeKeys(`web=${OLD}\nci=${CI}\n`);
    const config = join(dir, 'etagere.yaml');
    writeFileSync(config, 'consumers:\n  enabled: true\n  keys:\n    - name: web\n    - name: ci\n');
    proxy = await serveCli({
      ETAGERE_CONFIG: config,
      UPSTREAM_URL: fake.url,
      ETAGERE_TOKENS: 'octo=demo_token_octocat_repo',
      ETAGERE_CONSUMER_KEYS_FILE: keys,
    });
    await until(() => /etagere listening/.test(proxy.cli.stdout()), 30_000, 'the listening line');
    client = new Client(proxy.url, { pipelining: 1, connections: 1 } as ConstructorParameters<typeof Client>[1]);
  });
  afterAll(async () => {
    await client?.close();
    proxy?.cli.child.kill('SIGTERM');
    await proxy?.cli.exited;
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the keys of the file, and refuses a key that is not in it', async () => {
    expect(await status(OLD)).toBe(200);
    expect(await status(CI)).toBe(200);
    expect(await status(NEW)).toBe(401);
  });

  it('an edit adds the new key next to the old one, then a second edit takes the old one out, on the same connection', async () => {
    writeKeys(`web=${OLD}\nweb=${NEW}\nci=${CI}\n`);
    await until(async () => (await status(NEW)) === 200, 10_000, 'the new key to work');
    expect(await status(OLD)).toBe(200);
    writeKeys(`web=${NEW}\nci=${CI}\n`);
    await until(async () => (await status(OLD)) === 401, 10_000, 'the old key to stop working');
    expect(await status(NEW)).toBe(200);
    expect(await status(CI)).toBe(200);
  });

  it('hostile: a bad file (an unknown consumer, then an emptied file) keeps the keys as they were', async () => {
    const failedBefore = reloads(/^consumer keys reload failed/);
    writeKeys(`web=${NEW}\nintruder=${OLD}\n`);
    await until(() => reloads(/^consumer keys reload failed/) > failedBefore, 10_000, 'the failed reload to be logged');
    writeKeys('');
    await until(() => reloads(/^consumer keys reload failed/) > failedBefore + 1, 10_000, 'the second failed reload');
    expect(await status(NEW)).toBe(200);
    expect(await status(CI)).toBe(200);
    expect(await status(OLD)).toBe(401);
    const metrics = (await get(`${proxy.admin}/metrics`)).body;
    expect(metrics).toMatch(/etagere_consumer_key_reloads_total\{result="failed"\} [2-9]/);
  });

  it('SIGHUP reloads it too; the log names consumers, never keys', async () => {
    writeKeys(`web=${OLD}\nci=${CI}\n`);
    proxy.cli.child.kill('SIGHUP');
    await until(async () => (await status(OLD)) === 200, 10_000, 'the reload');
    expect(await status(NEW)).toBe(401);
    const text = proxy.cli.stdout() + proxy.cli.stderr();
    for (const secret of [OLD, NEW, CI]) expect(text).not.toContain(secret);
    expect(text).toMatch(/"changed":\["web"\]/);
  });
});
