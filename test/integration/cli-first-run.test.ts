/**
 * A newcomer's first run, through the real CLI and real listeners: help and version exit 0,
 * a malformed token entry is a config error naming its position, start-up says what it runs with,
 * SIGTERM logs its drain result, 502/504 carry X-Request-Id and name the host, and the demo's
 * access log is off unless --verbose.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliProcess } from '../helpers/cli.js';
import { startTestProxy, until, type TestProxy } from '../helpers/proxy.js';
import { deadPort, startJsonUpstream, startScriptedUpstream, type ScriptedUpstream } from '../helpers/upstream.js';

const POOL_TOKEN = 'cli_pool_token_startup_0123456789';

function jsonLines(cli: CliProcess): Array<Record<string, unknown>> {
  return cli
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('CLI help and version', () => {
  it.each([[['--help']], [['serve', '--help']], [['demo', '-h']], [['fake-upstream', '--help']], [['--version']]])(
    'etagere %j exits 0 with its text on stdout',
    async (args) => {
      const cli = runCli(args);
      expect(await cli.exited).toEqual({ code: 0, signal: null });
      expect(cli.stdout()).toMatch(args[0] === '--version' ? /^etagere \d+\.\d+\.\d+\n$/ : /^usage: etagere/);
      if (args[0] === 'serve' || args[0] === '--help') expect(cli.stdout()).toContain('ETAGERE_TOKENS_FILE');
    },
    20_000,
  );

  it('an unknown flag is still an error (exit 2) with the usage', async () => {
    const cli = runCli(['serve', '--no-such-flag']);
    expect((await cli.exited).code).toBe(2);
    expect(cli.stderr()).toContain('usage: etagere');
  }, 20_000);
});

describe('etagere serve', () => {
  let upstream: ScriptedUpstream;
  beforeAll(async () => {
    upstream = await startJsonUpstream();
  });
  afterAll(async () => upstream?.close());

  it('a malformed ETAGERE_TOKENS entry is a config error (exit 2) naming its position, never its value', async () => {
    const cli = runCli(['serve'], {
      PORT: '0',
      ADMIN_PORT: '0',
      UPSTREAM_URL: upstream.url,
      ETAGERE_TOKENS: `ci=${POOL_TOKEN},alice:${POOL_TOKEN}`,
    });
    expect((await cli.exited).code).toBe(2);
    expect(cli.stderr()).toMatch(/ETAGERE_TOKENS entry 2: the token contains ":"/);
    expect(cli.stderr() + cli.stdout()).not.toContain(POOL_TOKEN);
  }, 20_000);

  it('says what it runs with at start-up, and logs its drain result on SIGTERM', async () => {
    const cli = runCli(['serve'], { PORT: '0', ADMIN_PORT: '0', UPSTREAM_URL: upstream.url, ETAGERE_TOKENS: `ci=${POOL_TOKEN}` });
    try {
      await until(() => jsonLines(cli).some((line) => line.msg === 'etagere listening') || cli.child.exitCode !== null, 20_000, 'start-up');
      const line = jsonLines(cli).find((entry) => entry.msg === 'etagere listening');
      expect(line, cli.stderr()).toMatchObject({
        upstreams: [`github / -> ${upstream.url}`],
        pool: '1 pool token',
        redis: expect.stringMatching(/^none/) as unknown,
        public_url: expect.stringMatching(/^none/) as unknown,
        workers: 1,
      });
      expect(String(line!.url)).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(String(line!.admin)).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toEqual({ code: 0, signal: null });
      await until(() => cli.child.stdout!.readableEnded, 5_000, 'stdout to end');
      const stopped = jsonLines(cli).find((entry) => entry.msg === 'etagere stopped: every request finished');
      expect(stopped).toMatchObject({ drained: true, cut: 0 });
      expect(jsonLines(cli).find((entry) => String(entry.msg).startsWith('etagere shutting down'))).toMatchObject({ signal: 'SIGTERM' });
      expect(cli.stdout()).not.toContain(POOL_TOKEN);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);
});

describe('502 and 504 answers', () => {
  let proxy: TestProxy;
  let slow: ScriptedUpstream;
  let down: number;
  beforeAll(async () => {
    down = await deadPort();
    slow = await startScriptedUpstream(() => undefined); // never answers
    proxy = await startTestProxy({
      upstreams: [
        { name: 'down', prefix: '/down', strip_prefix: true, url: `http://127.0.0.1:${down}`, pass_through: true },
        { name: 'slow', prefix: '/slow', strip_prefix: true, url: slow.url, timeouts: { headers_ms: 200 } },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await slow?.close();
  });

  it("a 502 carries X-Request-Id (the client's own) and names the upstream host", async () => {
    const res = await request(`${proxy.url}/down/repos/a/b`, { headers: { 'x-request-id': 'trace-502' } });
    expect(res.statusCode).toBe(502);
    expect(res.headers['x-request-id']).toBe('trace-502');
    const body = (await res.body.json()) as { message: string };
    expect(body.message).toContain(`"down" (127.0.0.1:${down})`);
  });

  it('a 504 carries X-Request-Id and names the upstream host', async () => {
    const res = await request(`${proxy.url}/slow/x`);
    expect(res.statusCode).toBe(504);
    expect(res.headers['x-request-id']).toMatch(/.+/);
    expect(((await res.body.json()) as { message: string }).message).toContain(`"slow" (${new URL(slow.url).host})`);
  });

  it('a passed-through method that fails upstream gets a 502 with X-Request-Id', async () => {
    const res = await request(`${proxy.url}/down/items`, { method: 'POST', body: '{}', headers: { 'x-request-id': 'trace-post' } });
    expect(res.statusCode).toBe(502);
    expect(res.headers['x-request-id']).toBe('trace-post');
    await res.body.dump();
  });

  it('a hostile X-Request-Id is replaced, never echoed', async () => {
    const res = await request(`${proxy.url}/down/repos/a/b`, { headers: { 'x-request-id': 'bad id<script>' } });
    expect(res.statusCode).toBe(502);
    expect(res.headers['x-request-id']).not.toContain('<');
    await res.body.dump();
  });
});

describe('demo', () => {
  async function runDemo(extra: string[]): Promise<{ cli: CliProcess; admin: number }> {
    const [port, fakePort, admin] = [await deadPort(), await deadPort(), await deadPort()];
    const cli = runCli(['demo', '--port', String(port), '--fake-port', String(fakePort), '--admin-port', String(admin), ...extra], {
      ETAGERE_TOKENS: undefined,
    });
    await until(
      () => (cli.stdout().match(/^requests \d+ \| hit ratio/gm) ?? []).length >= 2 || cli.child.exitCode !== null,
      20_000,
      'summary lines',
    );
    return { cli, admin };
  }
  async function stop(cli: CliProcess): Promise<void> {
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toEqual({ code: 0, signal: null });
  }

  it('by default: no access lines, and the banner shows the status page', async () => {
    const { cli, admin } = await runDemo([]);
    try {
      expect(cli.stdout()).toMatch(new RegExp(`status page +http://127\\.0\\.0\\.1:${admin}/\\n`));
      expect(cli.stdout()).not.toContain('"msg":"request"');
      await stop(cli);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);

  it('--verbose turns the access log on', async () => {
    const { cli } = await runDemo(['--verbose']);
    try {
      await until(() => cli.stdout().includes('"msg":"request"'), 10_000, 'an access line');
      await stop(cli);
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);
});
