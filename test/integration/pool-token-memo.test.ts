/**
 * Issue 19, item 3, against the fake GitHub API: a pool of 50 tokens that are not equivalent
 * (a cache partition per token). A hit is answered from the token whose entry was stored last
 * (one L1 probe: src/cache/token-memo.ts); a token removed from the pool by a tokens file reload
 * never has its entry served again, though the entry is still in L1; the request goes upstream on
 * a member instead, and its entry is the one served from then on.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../../src/config/load.js';
import { startFakeUpstream, type FakeUpstream } from '../../src/fake-upstream/index.js';
import { parseTokenSpec } from '../../src/fake-upstream/tokens.js';
import { get, type Answer } from '../helpers/http.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';
import { testSecret } from '../helpers/secrets.js';

const NAMES = Array.from({ length: 50 }, (_, index) => `m${String(index + 1).padStart(2, '0')}`);
const TOKENS = new Map(NAMES.map((name) => [name, testSecret(`token-memo pool token ${name}`, `token_memo_pool_${name}_7c1e9a`)]));
const FAKE_TOKENS = parseTokenSpec(NAMES.map((name) => `${TOKENS.get(name)!}@user-${name}:public_repo`).join(','));

const dir = mkdtempSync(join(tmpdir(), 'etagere-token-memo-'));
const file = join(dir, 'tokens');
const writeMembers = (names: readonly string[]): void =>
  writeFileSync(file, `# pool tokens\n${names.map((name) => `${name}=${TOKENS.get(name)!}`).join('\n')}\n`);

let fake: FakeUpstream | undefined;
let proxy: TestProxy | undefined;
afterAll(async () => {
  await proxy?.close();
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

const tokenOf = (answer: Answer): string => String(answer.headers['x-etagere-token']);
const statusOf = (answer: Answer): string => String(answer.headers['cache-status']);

describe('a pool of 50 tokens that are not equivalent', () => {
  it('hits come from the token that stored the entry; a removed token is never served, and the entry fetched instead is', async () => {
    fake = await startFakeUpstream({ tokens: FAKE_TOKENS });
    writeMembers(NAMES);
    proxy = await startTestProxy(
      resolveSecrets(
        {
          upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, cache: { policy: 'max-age' } }],
          pool: { tokens_file: file, equivalent: false },
        },
        {},
      ),
    );
    const url = `${proxy.url}/repos/octocat/hello-world`;
    const first = await get(url);
    expect(first.status).toBe(200);
    expect(statusOf(first)).toMatch(/fwd=miss/);
    const stored = tokenOf(first);
    expect(NAMES).toContain(stored);
    for (let round = 0; round < 5; round++) {
      const hit = await get(url);
      expect(statusOf(hit)).toMatch(/^etagere; hit/);
      expect(tokenOf(hit)).toBe(stored);
      expect(hit.body).toBe(first.body);
    }
    const metrics = await get(`${proxy.adminUrl}/metrics`);
    expect(metrics.body).toMatch(/etagere_cache_bytes\{tier="token_memo"\} [1-9]/);

    // The token that stored the entry leaves the pool: its partition is not served any more.
    writeMembers(NAMES.filter((name) => name !== stored));
    await proxy.reloadTokens('signal');
    expect(proxy.tokens().map((token) => token.name)).not.toContain(stored);
    const after = await get(url);
    expect(after.status).toBe(200);
    expect(statusOf(after)).toMatch(/fwd=miss/);
    const replacement = tokenOf(after);
    expect(replacement).not.toBe(stored);
    const next = await get(url);
    expect(statusOf(next)).toMatch(/^etagere; hit/);
    expect(tokenOf(next)).toBe(replacement);

    // Hostile: the removed token comes back (its old entry still fresh in L1): the newest entry is what is served.
    writeMembers(NAMES);
    await proxy.reloadTokens('signal');
    expect(proxy.tokens().map((token) => token.name)).toContain(stored);
    const back = await get(url);
    expect(statusOf(back)).toMatch(/^etagere; hit/);
    expect(tokenOf(back)).toBe(replacement);
  });
});
