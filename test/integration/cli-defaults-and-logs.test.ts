/**
 * The real CLI (`etagere serve` as a child process):
 *   defaults that fail closed: loopback by default, and a pool on a non-loopback address without
 *   consumer keys refuses to start unless `pool.open: true`
 *   logs: a warn line is in stdout right after it happens, an info line within a second
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliProcess, logLines } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { deadPort, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const POOL_TOKEN = 'cli_pool_token_default_0123456789';

/** Waits for "etagere listening" and returns the proxy's and the admin's URLs. */
async function listening(cli: CliProcess): Promise<{ url: string; admin: string }> {
  await until(
    () => logLines(cli).some((line) => line.msg === 'etagere listening') || cli.child.exitCode !== null,
    20_000,
    'the proxy to start',
  );
  const line = logLines(cli).find((entry) => entry.msg === 'etagere listening');
  if (line === undefined) throw new Error(`did not start: ${cli.stderr()}`);
  return { url: String(line.url), admin: String(line.admin) };
}

async function stop(cli: CliProcess): Promise<void> {
  if (cli.child.exitCode === null) cli.child.kill('SIGTERM');
  await cli.exited;
}

describe('the real CLI', () => {
  let upstream: ScriptedUpstream;
  let dir: string;
  const base = { PORT: '0', ADMIN_PORT: '0', ETAGERE_CONFIG: undefined, HOST: undefined, ADMIN_HOST: undefined };

  beforeAll(async () => {
    upstream = await startScriptedUpstream((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=60' });
      res.end('{}');
    });
    dir = mkdtempSync(join(tmpdir(), 'etagere-cli-defaults-'));
  });
  afterAll(async () => {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  // Concurrent: each test has its own processes and ports, and none measures a time; the log tests below run after them, alone.
  describe.concurrent('defaults that fail closed', () => {
    it('listens on 127.0.0.1 by default, not on every address', async () => {
      const cli = runCli(['serve'], { ...base, UPSTREAM_URL: upstream.url });
      try {
        const { url } = await listening(cli);
        expect(new URL(url).hostname).toBe('127.0.0.1');
        expect((await request(url)).statusCode).toBe(200);
        // 127.0.0.2 is this machine too (Linux routes 127/8 to lo), but only a 0.0.0.0 listener takes it.
        const other = new URL(url);
        other.hostname = '127.0.0.2';
        await expect(request(other.href)).rejects.toThrow(/ECONNREFUSED|connect/);
      } finally {
        await stop(cli);
      }
    });

    it.each(['0.0.0.0', '::', '192.0.2.10', '127.0.0.1.nip.io'])(
      'a pool on %s without consumer keys refuses to start (exit 2), saying why and how to open it',
      async (host) => {
        const cli = runCli(['serve', '--config', 'config/default.yaml'], {
          ...base,
          HOST: host,
          UPSTREAM_URL: upstream.url,
          ETAGERE_TOKENS: `ci=${POOL_TOKEN}`,
        });
        const { code } = await cli.exited;
        expect(code).toBe(2);
        expect(cli.stderr()).toMatch(/listen\.host/);
        expect(cli.stderr()).toMatch(/pool\.open/);
        expect(cli.stderr()).toMatch(/consumer/);
        expect(`${cli.stdout()}${cli.stderr()}`).not.toContain(POOL_TOKEN);
      },
    );

    it('starts on 0.0.0.0 with pool.open: true, or with consumer keys on', async () => {
      const open = join(dir, 'open.yaml');
      writeFileSync(open, `pool:\n  open: true\n  probe_at_start: false\n`);
      const keyed = join(dir, 'keyed.yaml');
      writeFileSync(
        keyed,
        `pool:\n  probe_at_start: false\nconsumers:\n  enabled: true\n  keys:\n    - {name: web, env: ETAGERE_KEY_WEB}\n`,
      );
      for (const file of [open, keyed]) {
        const cli = runCli(['serve', '--config', file], {
          ...base,
          HOST: '0.0.0.0',
          UPSTREAM_URL: upstream.url,
          ETAGERE_TOKENS: `ci=${POOL_TOKEN}`,
          ETAGERE_KEY_WEB: 'cli_consumer_key_default',
        });
        try {
          await listening(cli);
        } finally {
          await stop(cli);
        }
      }
    });

    it('hostile: a pool on loopback needs neither (127.0.0.1, ::1, localhost)', async () => {
      for (const host of ['127.0.0.1', '::1', 'localhost']) {
        const cli = runCli(['serve'], { ...base, HOST: host, UPSTREAM_URL: upstream.url, ETAGERE_TOKENS: `ci=${POOL_TOKEN}` });
        try {
          await listening(cli);
        } finally {
          await stop(cli);
        }
      }
    });
  });

  describe('logs are written while the process runs', () => {
    it('a warn line is in stdout right after it happens (not after the periodic flush)', async () => {
      const cli = runCli(['serve'], { ...base, UPSTREAM_URL: `http://127.0.0.1:${await deadPort()}` });
      try {
        const { url } = await listening(cli);
        const answer = await request(`${url}/repos/o/r`);
        await answer.body.text();
        expect(answer.statusCode).toBeGreaterThanOrEqual(500);
        // At once: well before LOG_FLUSH_MS (500 ms) would have flushed it anyway.
        await until(() => logLines(cli).some((line) => line.msg === 'upstream request failed'), 300, 'the warn line');
      } finally {
        await stop(cli);
      }
    });

    it('a lone info line (one access line, nothing else) is in stdout within a second', async () => {
      const cli = runCli(['serve'], { ...base, UPSTREAM_URL: upstream.url });
      try {
        const { url } = await listening(cli);
        const answer = await request(`${url}/repos/o/lone`);
        await answer.body.text();
        expect(answer.statusCode).toBe(200);
        await until(() => logLines(cli).some((line) => line.msg === 'request' && line.path === '/repos/o/lone'), 1_000, 'the access line');
      } finally {
        await stop(cli);
      }
    });
  });
});
