/**
 * API addresses inside JSON bodies point at the proxy; nothing else moves.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isJsonMediaType } from '../../src/http/headers/fields.js';
import { hasUrlsUnder, rewriteBodyUrls, weakened } from '../../src/http/representation.js';
import { MAX_BASES, createRewrittenBodies } from '../../src/cache/store/entry-form.js';

const API = 'https://api.github.com';
const PROXY = 'http://proxy.internal:8080';

function rewritten(value: unknown, from = API, to = PROXY): unknown {
  const out = rewriteBodyUrls(Buffer.from(JSON.stringify(value)), from, to);
  return out === undefined ? value : JSON.parse(out.toString());
}

describe('rewriteBodyUrls', () => {
  it('points string values under the API base at the proxy, and leaves web addresses and other hosts', () => {
    const repo = {
      url: `${API}/repos/octocat/hello-world`,
      owner: { login: 'octocat', url: `${API}/users/octocat`, html_url: 'https://github.com/octocat' },
      keys_url: `${API}/repos/octocat/hello-world/keys{/key_id}`,
      notifications_url: `${API}/repos/octocat/hello-world/notifications{?since,all,participating}`,
      html_url: 'https://github.com/octocat/hello-world',
      avatar_url: 'https://avatars.githubusercontent.com/u/1?v=4',
      homepage: 'https://example.org',
      list: [`${API}/a`, `${API}?page=2`, `${API}`, 7, null],
    };
    expect(rewritten(repo)).toEqual({
      url: `${PROXY}/repos/octocat/hello-world`,
      owner: { login: 'octocat', url: `${PROXY}/users/octocat`, html_url: 'https://github.com/octocat' },
      keys_url: `${PROXY}/repos/octocat/hello-world/keys{/key_id}`,
      notifications_url: `${PROXY}/repos/octocat/hello-world/notifications{?since,all,participating}`,
      html_url: 'https://github.com/octocat/hello-world',
      avatar_url: 'https://avatars.githubusercontent.com/u/1?v=4',
      homepage: 'https://example.org',
      list: [`${PROXY}/a`, `${PROXY}?page=2`, `${PROXY}`, 7, null],
    });
  });

  it('never touches a look-alike host, a longer base path, a key, or a URL quoted inside text', () => {
    const body = {
      a: 'https://api.github.com.evil.example/x',
      b: 'https://api.github.comx/y',
      [`${API}/as-a-key`]: 1,
      text: `see "${API}/repos/a/b" for details`,
      escapedBackslashThenUrl: `\\`,
    };
    expect(rewriteBodyUrls(Buffer.from(JSON.stringify(body)), API, PROXY)).toBeUndefined();
    // GHES: the base has a path; /api/v3x is not under /api/v3, and the web root is not either.
    const ghes = 'https://ghe.example.com/api/v3';
    const onGhes = { url: `${ghes}/repos/a/b`, near: 'https://ghe.example.com/api/v3x', html_url: 'https://ghe.example.com/a/b' };
    expect(rewritten(onGhes, ghes)).toEqual({ ...onGhes, url: `${PROXY}/repos/a/b` });
  });

  it('keeps a value that follows an escaped backslash (the quote there is real)', () => {
    const body = Buffer.from(`{"a":"x\\\\","b":"${API}/users/a"}`);
    expect(JSON.parse(rewriteBodyUrls(body, API, PROXY)!.toString())).toEqual({ a: 'x\\', b: `${PROXY}/users/a` });
  });

  it('writes the proxy base JSON-escaped, so no base can break out of its string', () => {
    const hostile = 'http://x"},"admin":true,"y":{"z":"';
    const out = rewriteBodyUrls(Buffer.from(JSON.stringify({ url: `${API}/a` })), API, hostile)!;
    expect(JSON.parse(out.toString())).toEqual({ url: `${hostile}/a` });
  });

  it('is the same as mapping every string value, for any JSON (property)', () => {
    const urlish = fc.oneof(
      fc.webPath().map((path) => `${API}${path}`),
      fc.constantFrom(API, `${API}.evil/x`, `https://github.com/x`, `"${API}/q"`, `\\${API}/x`),
      fc.string(),
    );
    const json = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, urlish, fc.integer(), fc.constant(null), tie('array'), tie('object')),
      array: fc.array(tie('value'), { maxLength: 4 }),
      object: fc.dictionary(urlish, tie('value'), { maxKeys: 4 }),
    })).value;
    const expected = (value: unknown): unknown => {
      if (typeof value === 'string') {
        const next = value.charAt(API.length);
        return value.startsWith(API) && (next === '' || '/?#{'.includes(next)) ? PROXY + value.slice(API.length) : value;
      }
      if (Array.isArray(value)) return value.map(expected);
      if (value !== null && typeof value === 'object')
        return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, expected(v)]));
      return value;
    };
    fc.assert(
      fc.property(json, (value) => {
        const text = JSON.stringify(value);
        const out = rewriteBodyUrls(Buffer.from(text), API, PROXY);
        expect(out === undefined ? value : JSON.parse(out.toString())).toEqual(expected(value));
        expect(out !== undefined).toBe(hasUrlsUnder(Buffer.from(text), API));
      }),
      { numRuns: 500 },
    );
  });

  it('recognises JSON media types only', () => {
    expect(isJsonMediaType('application/json; charset=utf-8')).toBe(true);
    expect(isJsonMediaType('application/vnd.github+json')).toBe(true);
    expect(isJsonMediaType('Application/JSON')).toBe(true);
    expect(isJsonMediaType('application/vnd.github.v3+json')).toBe(true);
    expect(isJsonMediaType('application/vnd.github.raw')).toBe(false);
    // GitHub labels a raw file with the media type asked for: its bytes are content, not JSON to rewrite.
    expect(isJsonMediaType('application/vnd.github.raw+json; charset=utf-8')).toBe(false);
    expect(isJsonMediaType('application/vnd.github.v3.raw+json')).toBe(false);
    expect(isJsonMediaType('text/plain')).toBe(false);
    expect(isJsonMediaType(undefined)).toBe(false);
  });

  it('weakens strong ETags and keeps weak ones', () => {
    expect(weakened('"abc"')).toBe('W/"abc"');
    expect(weakened('W/"abc"')).toBe('W/"abc"');
  });
});

describe('rewritten bodies memory', () => {
  it('stays under its byte bound and keeps at most MAX_BASES bases an entry, the least recently used replaced', () => {
    const store = createRewrittenBodies<{ base: string; body: Buffer }>(64 * 1024);
    const entries = Array.from({ length: 100 }, () => ({}));
    for (const entry of entries) store.set(entry, { base: 'http://a', body: Buffer.alloc(4096) });
    expect(store.bytes).toBeLessThanOrEqual(64 * 1024);
    const entry = {};
    const before = store.bytes;
    for (let index = 0; index < MAX_BASES; index++) store.set(entry, { base: `http://h${index}`, body: Buffer.alloc(10) });
    expect(store.get(entry, 'http://h0')?.base).toBe('http://h0'); // h0 used: h1 is now the least recent
    for (let index = MAX_BASES; index < MAX_BASES + 3; index++) store.set(entry, { base: `http://h${index}`, body: Buffer.alloc(10) });
    const kept = Array.from({ length: MAX_BASES + 3 }, (_, index) => store.get(entry, `http://h${index}`) !== undefined);
    // Kept: h0 (used since) and the three newest; replaced: the least recently used ones.
    expect(kept).toEqual(kept.map((_, index) => index === 0 || index >= 4));
    expect(kept.filter(Boolean)).toHaveLength(MAX_BASES);
    expect(store.bytes - before).toBeLessThanOrEqual(MAX_BASES * (10 + 512));
  });
});
