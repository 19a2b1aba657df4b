/**
 * The admin status page in a real headless browser (Debian chromium driven by playwright-core):
 * it renders a row per pool token with its remaining quota, state and reset, shows Redis and
 * upstream health, and never a token value. Skipped, saying why, where chromium is not installed
 * (.ci/run installs it).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

function findChromium(): string | undefined {
  for (const candidate of [process.env.CHROMIUM_PATH, 'chromium', 'chromium-browser']) {
    if (candidate === undefined || candidate === '') continue;
    const which = spawnSync('sh', ['-c', `command -v ${candidate}`], { encoding: 'utf8' });
    const path = which.stdout.trim();
    if (which.status === 0 && path.length > 0) return path;
  }
  return undefined;
}
const CHROMIUM = findChromium();
if (CHROMIUM === undefined)
  process.stderr.write('status page browser test skipped: chromium is not installed (apt-get install chromium)\n');

const TOKENS = ['status_page_token_aa1', 'status_page_token_bb2'];

describe('admin status page', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    fake = await startFakeUpstream({ tokens: parseTokenSpec(TOKENS.map((t, i) => `${t}@u${i}:public_repo`).join(',')), tokenLimit: 40 });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true }],
      pool: {
        tokens: [
          { name: 'alpha', value: TOKENS[0]! },
          { name: 'beta', value: TOKENS[1]! },
        ],
      },
    });
    for (let i = 0; i < 6; i++) await (await request(`${proxy.url}/users/octocat?i=${i % 3}`)).body.dump();
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it('serves a self-contained page and a status JSON without token values', async () => {
    const page = await request(`${proxy.adminUrl}/`);
    const html = await page.body.text();
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/text\/html/);
    expect(html).not.toMatch(/<(script|link|img)[^>]+(src|href)=/i); // no external assets
    const status = JSON.parse(await (await request(`${proxy.adminUrl}/admin/status`)).body.text()) as {
      recent: { requests: number; hits: number; saved: number };
      tokens: Array<{ name: string }>;
    };
    expect(status.tokens.map((t) => t.name)).toEqual(['alpha', 'beta']);
    expect(status.recent.requests).toBe(6);
    expect(status.recent.hits).toBe(3);
    for (const secret of TOKENS) expect(JSON.stringify(status)).not.toContain(secret);
  });

  it.skipIf(CHROMIUM === undefined)(
    'renders token rows, health and ratios in headless chromium',
    async () => {
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
      try {
        const page = await browser.newPage();
        await page.goto(`${proxy.adminUrl}/`);
        await page.waitForSelector('#tokens tbody tr[data-token="beta"]', { timeout: 10_000 });
        const rows = await page.$$eval('#tokens tbody tr', (trs) =>
          trs.map((tr) => Array.from(tr.querySelectorAll('td')).map((td) => (td as { textContent: string | null }).textContent ?? '')),
        );
        expect(rows.map((r) => r[0])).toEqual(['alpha', 'beta']);
        for (const row of rows) {
          expect(row[1]).toMatch(/^\d+ \/ 40$/);
          expect(row[3]).toBe('ok');
          expect(row[4]).toMatch(/^\d+(m \d+s|s|h \d+m)$/);
        }
        expect(await page.textContent('#hit-ratio')).toBe('50.0 %');
        expect(await page.textContent('#quota-saved')).toBe('3');
        expect(await page.textContent('#redis')).toBe('not used');
        expect(await page.$$eval('#upstreams tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-upstream')))).toEqual(['github']);
        const shot = join(process.env.ETAGERE_SCREENSHOT_DIR ?? mkdtempSync(join(tmpdir(), 'etagere-status-')), 'status.png');
        await page.screenshot({ path: shot, fullPage: true });
        expect(statSync(shot).size).toBeGreaterThan(5_000);
        const content = await page.content();
        for (const secret of TOKENS) expect(content).not.toContain(secret);
      } finally {
        await browser.close();
      }
    },
    30_000,
  );
});
