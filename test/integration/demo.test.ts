/** `etagere demo` (what `npm run demo` runs): fake upstream, proxy, built-in load and a live summary. */
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { summaryLine } from '../../src/main/demo-banner.js';
import { runCli } from '../helpers/cli.js';
import { until } from '../helpers/proxy.js';
import { deadPort } from '../helpers/upstream.js';

describe('demo', () => {
  it('formats one summary line', () => {
    const line = summaryLine({ windowSeconds: 300, requests: 120, saved: 86, hits: 80, hitRatio: 80 / 120, upstreams: [] }, [
      { name: 'alice-public', remaining: 52, limit: 60, state: 'ok' },
      { name: 'bob-public', remaining: 0, limit: 60, state: 'exhausted' },
    ]);
    expect(line).toBe('requests 120 | hit ratio 66.7 % | quota saved 86 | alice-public 52/60 | bob-public 0/60 exhausted');
  });

  it('runs the fake, the proxy and a consumer load, printing a summary line every second', async () => {
    const [port, fakePort, adminPort] = [await deadPort(), await deadPort(), await deadPort()];
    const cli = runCli(['demo', '--port', String(port), '--fake-port', String(fakePort), '--admin-port', String(adminPort)], {
      LOG_LEVEL: 'warn',
    });
    try {
      await until(() => (cli.stdout().match(/^requests \d+ \| hit ratio/gm) ?? []).length >= 2, 20_000, 'two summary lines');
      const lines = cli.stdout().match(/^requests \d+ \| hit ratio .*$/gm)!;
      expect(lines.at(-1)).toMatch(/quota saved \d+ \| alice-public \d+\/\d+/);
      expect(cli.stdout()).toContain(`http://127.0.0.1:${port}`);
      const res = await request(`http://127.0.0.1:${adminPort}/admin/status`);
      const status = JSON.parse(await res.body.text()) as { recent: { requests: number } };
      expect(status.recent.requests).toBeGreaterThan(0);
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toEqual({ code: 0, signal: null });
    } finally {
      cli.child.kill('SIGKILL');
    }
  }, 30_000);
});
