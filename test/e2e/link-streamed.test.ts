import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

describe('Link rewriting on streamed (uncached) answers', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  beforeAll(async () => {
    fake = await startFakeUpstream({ port: 0, anonymousLimit: 100_000 });
    proxy = await startTestProxy({
      trust_forwarded: true,
      cache: { max_entry_bytes: 1000 },
      upstreams: [
        { name: 'api', prefix: '/', url: fake.url, cache: { policy: 'none' } },
        { name: 'small', prefix: '/small', url: fake.url, strip_prefix: true },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
  });

  it.each([
    ['policy none', '/orgs/etagere-org/repos?per_page=30', ''],
    ['body over max_entry_bytes (too-large)', '/small/orgs/etagere-org/repos?per_page=30', '/small'],
    ['Range request (bypass)', '/small/orgs/etagere-org/repos?per_page=30', '/small'],
  ])('%s: rel="next" points at the proxy', async (label, path, prefix) => {
    const headers: Record<string, string> = label.startsWith('Range') ? { range: 'bytes=0-' } : {};
    const res = await request(proxy.url + path, { headers });
    await res.body.dump();
    const link = String(res.headers.link);
    expect(link).not.toContain(fake.url);
    expect(link).toContain(`<${proxy.url}${prefix}/orgs/etagere-org/repos?per_page=30&page=2>; rel="next"`);
  });
});
