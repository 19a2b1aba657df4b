/** X-Request-Id: a sane client id is kept; otherwise a per-app random prefix and a counter. */
import { describe, expect, it } from 'vitest';
import { createRequestIds } from '../../src/http/target.js';

const GENERATED = /^[0-9a-f]{12}-[0-9a-z]+$/;

describe('request ids', () => {
  const requestId = createRequestIds();
  it('keeps a client id that is a sane token', () => {
    expect(requestId('req-1')).toBe('req-1');
    expect(requestId('a.b_c:d@e/f+g=h-0')).toBe('a.b_c:d@e/f+g=h-0');
  });

  it('replaces a client id that is not one: too long, empty, spaces, quotes, control characters, repeated', () => {
    for (const bad of ['x'.repeat(129), '', 'a b', 'a"b', 'a\u0000b', 'é']) expect(requestId(bad)).toMatch(GENERATED);
    expect(requestId(['one', 'two'])).toMatch(GENERATED);
    expect(requestId(undefined)).toMatch(GENERATED);
  });

  it('makes ids that are unique in an app and share its prefix', () => {
    const ids = Array.from({ length: 10_000 }, () => requestId(undefined));
    expect(new Set(ids).size).toBe(ids.length);
    const prefixes = new Set(ids.map((id) => id.split('-')[0]));
    expect(prefixes.size).toBe(1);
  });

  it('draws another prefix in another app (or process), so ids do not collide across apps, workers and replicas', () => {
    const mine = requestId(undefined).split('-')[0];
    const theirs = createRequestIds()(undefined);
    expect(theirs).toMatch(GENERATED);
    expect(theirs.split('-')[0]).not.toBe(mine);
  });
});
