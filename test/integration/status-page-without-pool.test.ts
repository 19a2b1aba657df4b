/**
 * The status page of a proxy without a token pool shows "No token pool is configured"
 * with no empty table header above it, and the requests card names its period.
 */
import { spawnSync } from 'node:child_process';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const which = spawnSync('sh', ['-c', `command -v ${process.env.CHROMIUM_PATH ?? 'chromium'}`], { encoding: 'utf8' });
const CHROMIUM = which.status === 0 && which.stdout.trim().length > 0 ? which.stdout.trim() : undefined;

describe('status page without a pool', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  beforeAll(async () => {
    fake = await startFakeUpstream({});
    proxy = await startTestProxy({ upstreams: [{ name: 'github', prefix: '/', url: fake.url }] });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it.skipIf(CHROMIUM === undefined)(
    'no token table, the no-pool note, and "last 5 min" on the requests card',
    async () => {
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
      try {
        const page = await browser.newPage();
        await page.goto(`${proxy.adminUrl}/`);
        await page.waitForSelector('#no-pool', { state: 'visible', timeout: 10_000 });
        expect(await page.isVisible('#tokens')).toBe(false);
        expect(await page.isVisible('#tokens thead')).toBe(false);
        expect(await page.textContent('#requests-window')).toBe('last 5 min');
      } finally {
        await browser.close();
      }
    },
    30_000,
  );
});
