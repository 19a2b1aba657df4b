/**
 * Which request directives the cache acts on (cache.client_no_cache: honor, ignore, conditional).
 * A table from the headers a client sends to what it gets for a fresh entry: served from cache, or
 * sent upstream.
 */
import { describe, expect, it } from 'vitest';
import { requestDirectives } from '../../src/http/headers/fields.js';
import { clientDirectives, clientNoCacheMode, type ClientNoCache } from '../../src/cache/rules/client-directives.js';
import { decide, planFor } from '../../src/cache/rules/policy.js';
import type { CacheEntry } from '../../src/cache/rules/entry.js';

const NOW = 1_700_000_000_000;
/** Stored 10 s ago, fresh for 60 s. */
const fresh = { initialAge: 0, storedAt: NOW - 10_000, lifetime: 60, staleWhileRevalidate: 0, mustRevalidate: false };

type Outcome = 'cache' | 'upstream' | 'only-if-cached 504';

function outcome(
  cacheControl: string | undefined,
  pragma: string | undefined,
  mode: ClientNoCache,
  stored = true,
  conditional = false,
): Outcome {
  const directives = clientDirectives(requestDirectives(cacheControl, pragma), mode, conditional);
  const plan = planFor(stored ? (fresh as unknown as CacheEntry) : undefined, directives, NOW);
  if (plan.kind === 'only-if-cached') return 'only-if-cached 504';
  return plan.kind === 'fresh' ? 'cache' : 'upstream';
}

describe('client cache directives (cache.client_no_cache)', () => {
  const table: Array<[string, string | undefined, string | undefined, Outcome, Outcome]> = [
    // what the client sends                      Cache-Control                 Pragma       honor        ignore
    ['nothing', undefined, undefined, 'cache', 'cache'],
    ['fetch with If-None-Match (both headers)', 'no-cache', 'no-cache', 'upstream', 'cache'],
    ['Pragma: no-cache alone (HTTP/1.0)', undefined, 'no-cache', 'upstream', 'cache'],
    ['no-cache among others', 'no-cache, max-stale=5', undefined, 'upstream', 'cache'],
    ['upper case NO-CACHE', 'NO-CACHE', undefined, 'upstream', 'cache'],
    ['max-age=0 (a deliberate reload)', 'max-age=0', undefined, 'upstream', 'upstream'],
    ['max-age=0 beside no-cache', 'no-cache, max-age=0', 'no-cache', 'upstream', 'upstream'],
    ['max-age older than the entry', 'max-age=5', undefined, 'upstream', 'upstream'],
    ['min-fresh beyond the entry', 'min-fresh=120', undefined, 'upstream', 'upstream'],
    ['no-store (only stops storing)', 'no-store', undefined, 'cache', 'cache'],
    ['malformed no-cache="x', 'no-cache="x', undefined, 'upstream', 'cache'],
  ];
  for (const [what, cacheControl, pragma, honor, ignore] of table) {
    it(`${what}: honor → ${honor}, ignore → ${ignore}, with or without a validator`, () => {
      for (const conditional of [false, true]) {
        expect(outcome(cacheControl, pragma, 'honor', true, conditional)).toBe(honor);
        expect(outcome(cacheControl, pragma, 'ignore', true, conditional)).toBe(ignore);
      }
    });
    it(`${what}: conditional → ${honor} without a validator (curl), ${ignore} with one (a fetch poll)`, () => {
      expect(outcome(cacheControl, pragma, 'conditional', true, false)).toBe(honor);
      expect(outcome(cacheControl, pragma, 'conditional', true, true)).toBe(ignore);
    });
  }

  it('only-if-cached is honoured in both modes, even beside no-cache', () => {
    for (const mode of ['honor', 'ignore', 'conditional'] as const) {
      for (const conditional of [false, true]) {
        expect(outcome('only-if-cached, no-cache', 'no-cache', mode, false, conditional)).toBe('only-if-cached 504');
        expect(outcome('only-if-cached', undefined, mode, false, conditional)).toBe('only-if-cached 504');
      }
    }
  });

  it('ignore removes only no-cache: every other directive is kept as parsed', () => {
    const all = requestDirectives('no-cache, no-store, max-age=3, min-fresh=4, max-stale=5, only-if-cached', undefined);
    const { noCache, ...rest } = all;
    expect(noCache).toBe(true);
    expect(clientDirectives(all, 'ignore', false)).toEqual(rest);
    expect(clientDirectives(all, 'conditional', true)).toEqual(rest);
    expect(clientDirectives(all, 'honor', true)).toBe(all);
    expect(clientDirectives(all, 'conditional', false)).toBe(all);
    expect(all.noCache).toBe(true); // the parsed value is not mutated
  });

  it('no-cache under ignore still leaves a stale entry to revalidation', () => {
    const stale = { ...fresh, storedAt: NOW - 120_000 };
    for (const mode of ['ignore', 'conditional'] as const) {
      const directives = clientDirectives(requestDirectives('no-cache', 'no-cache'), mode, true);
      expect(decide(stale, directives, NOW).kind).toBe('revalidate');
    }
  });

  it('defaults: conditional under the GitHub policies, honor under rfc9111; a configured mode wins', () => {
    expect(clientNoCacheMode('max-age', undefined)).toBe('conditional');
    expect(clientNoCacheMode('revalidate', undefined)).toBe('conditional');
    expect(clientNoCacheMode('ttl', undefined)).toBe('conditional');
    expect(clientNoCacheMode('max-age', 'ignore')).toBe('ignore');
    expect(clientNoCacheMode('rfc9111', undefined)).toBe('honor');
    expect(clientNoCacheMode('rfc9111', 'ignore')).toBe('ignore');
    expect(clientNoCacheMode('max-age', 'honor')).toBe('honor');
  });
});
