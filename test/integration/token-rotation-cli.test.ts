/**
 * Token rotation with the real CLI: a real SIGHUP to a spawned `etagere serve` reloads
 * ETAGERE_TOKENS_FILE, in one process and with `workers: 2` (the primary owns the budget and
 * hands the workers the new members over IPC; with Redis it tells every worker to reload its own
 * pool). Requests through the workers use an added token and stop using a removed one, with no
 * failed request; the primary's file watch reloads an edit too. Logs name tokens, never values.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { serveCli, type CliProcess, type ServedCli } from '../helpers/cli.js';
import { get, missBurst } from '../helpers/http.js';
import { until } from '../helpers/proxy.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { testSecret } from '../helpers/secrets.js';

const TOKENS = {
  a: testSecret('token-rotation-cli a (ann)', 'rotation_cli_token_a_7e6d'),
  b: testSecret('token-rotation-cli b (ben)', 'rotation_cli_token_b_8d5c'),
  c: testSecret('token-rotation-cli c (cat)', 'rotation_cli_token_c_9c4b'),
};
const LOGINS = { a: 'ann', b: 'ben', c: 'cat' } as const;
type Name = keyof typeof TOKENS;

const linesOf = (...names: Name[]): string => names.map((name) => `${name}=${TOKENS[name]}`).join('\n') + '\n';
const used = (fake: FakeUpstream, name: Name): number => fake.stats().byCredential[LOGINS[name]] ?? 0;

describe('token rotation with the CLI: a real SIGHUP', () => {
  let fake: FakeUpstream;
  let redis: TestRedis | undefined;
  let dir: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({
      tokens: parseTokenSpec((Object.keys(TOKENS) as Name[]).map((name) => `${TOKENS[name]}@${LOGINS[name]}:public_repo`).join(',')),
      tokenLimit: 100_000,
    });
    dir = mkdtempSync(join(tmpdir(), 'etagere-rotation-cli-'));
  });
  afterAll(async () => {
    await fake?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function serve(file: string, env: Record<string, string>): Promise<ServedCli> {
    const served = await serveCli({
      UPSTREAM_URL: fake.url,
      ETAGERE_TOKENS: undefined,
      ETAGERE_TOKENS_FILE: file,
      LOG_LEVEL: 'info',
      ...env,
    });
    await until(
      async () => (await get(`${served.admin}/readyz`).catch(() => ({ status: 0 }))).status === 200,
      30_000,
      'the proxy to be ready',
    );
    // The SIGHUP handler is set once the process says it listens.
    await until(() => /listening/.test(served.cli.stdout()), 10_000, 'the listening line');
    return served;
  }

  async function names(admin: string): Promise<string> {
    const rows = (JSON.parse((await get(`${admin}/admin/tokens`)).body) as { tokens: Array<{ name: string }> }).tokens;
    return rows.map((row) => row.name).join(',');
  }

  /** SIGHUP after `a,b` -> `a,c`: the members change, b stops, c starts, and nothing failed meanwhile. */
  async function rotate(label: string, env: Record<string, string>): Promise<CliProcess> {
    const file = join(dir, `${label}-tokens`);
    writeFileSync(file, linesOf('a', 'b'));
    const proxy = await serve(file, env);
    try {
      await until(async () => (await names(proxy.admin)) === 'a,b', 15_000, 'the first members');
      const failed = await missBurst(proxy.url, `${label}-before`);
      expect(used(fake, 'b')).toBeGreaterThan(0);

      // A burst runs while the file changes and SIGHUP arrives: no request fails.
      writeFileSync(file, linesOf('a', 'c'));
      const during = missBurst(proxy.url, `${label}-during`, 120);
      proxy.cli.child.kill('SIGHUP');
      failed.push(...(await during));
      await until(async () => (await names(proxy.admin)) === 'a,c', 15_000, 'the members after SIGHUP');
      // SIGHUP reloaded (had the file watch been first, SIGHUP's reload found no change, and says so).
      await until(() => /"trigger":"signal"[^\n]*"msg":"token pool reloaded/.test(proxy.cli.stdout()), 10_000, 'the reload line');
      failed.push(...(await missBurst(proxy.url, `${label}-settle`, 12)));
      const [bAt, cAt] = [used(fake, 'b'), used(fake, 'c')];
      failed.push(...(await missBurst(proxy.url, `${label}-after`)));
      expect(used(fake, 'b')).toBe(bAt);
      expect(used(fake, 'c')).toBeGreaterThan(cAt);
      expect(failed).toEqual([]);
      expect(proxy.cli.child.exitCode).toBeNull(); // SIGHUP did not end it
      return proxy.cli;
    } catch (err) {
      proxy.cli.child.kill('SIGKILL');
      throw err;
    }
  }

  async function stop(cli: CliProcess): Promise<string> {
    cli.child.kill('SIGTERM');
    expect((await cli.exited).code).toBe(0);
    const output = `${cli.stdout()}${cli.stderr()}`;
    for (const secret of Object.values(TOKENS)) expect(output).not.toContain(secret);
    return output;
  }

  it('one process: SIGHUP reloads the tokens file under load', async () => {
    const cli = await rotate('single', {});
    const output = await stop(cli);
    expect(output).toMatch(/"added":\["c"\],"removed":\["b"\],"updated":\[\],"kept":\["a"\],"msg":"token pool reloaded"/);
  }, 60_000);

  it('workers: 2 without Redis: the primary reloads on SIGHUP and on a file edit, and the workers use the new members', async () => {
    const cli = await rotate('workers', { WORKERS: '2' });
    // The primary's watch: an edit brings b back and drops c.
    const file = join(dir, 'workers-tokens');
    writeFileSync(file, linesOf('b', 'a'));
    const edited = /"trigger":"file"[^\n]*"added":\["b"\],"removed":\["c"\]/;
    await until(() => edited.test(cli.stdout()), 15_000, 'the watch to reload the edit');
    await stop(cli);
  }, 90_000);

  it('workers: 2 with Redis: SIGHUP to the primary makes every worker reload its pool', async () => {
    redis = await startRedis();
    const config = join(dir, 'redis.yaml');
    writeFileSync(config, `redis:\n  key_prefix: "rotation-cli-${Date.now()}:"\n`);
    const cli = await rotate('redis', { WORKERS: '2', REDIS_URL: redis.url, ETAGERE_CONFIG: config });
    // Each worker owns a pool there, and each reloaded it on the primary's word.
    await until(
      () => (cli.stdout().match(/"trigger":"signal"[^\n]*"msg":"token pool reloaded/g) ?? []).length === 2,
      10_000,
      'both workers',
    );
    await stop(cli);
  }, 90_000);
});
