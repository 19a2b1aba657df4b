/**
 * Pure storage rules of policy `rfc9111` beyond the basics: Surrogate-Control (W3C Edge
 * Architecture 1.0) for the surrogate etagere is, any status with explicit freshness (RFC 9111
 * section 3), `must-understand` (section 5.2.2.3), heuristic freshness for the heuristically
 * cacheable statuses (section 4.2.2).
 */
import { describe, expect, it } from 'vitest';
import { parseCacheControl } from '../../src/http/headers/fields.js';
import { loadConfig } from '../../src/platform/config/load.js';
import { freshnessLifetime, notStorableReason, staleWindows, type FreshnessPolicy, type StoreInput } from '../../src/cache/rules/policy.js';
import { parseSurrogateControl, SURROGATE_CAPABILITY, withSurrogate } from '../../src/cache/rules/surrogate-control.js';

const policy = (kind: FreshnessPolicy['kind'], heuristicFraction = 0): FreshnessPolicy => ({
  kind,
  ttl: 60,
  maxAgeCap: undefined,
  staleIfError: 3600,
  staleWhileRevalidate: 0,
  heuristicFraction,
});

const input = (overrides: Partial<StoreInput> = {}): StoreInput => ({
  status: 200,
  method: 'GET',
  req: {},
  res: { maxAge: 60 },
  authorized: false,
  hasValidator: false,
  hasExpires: false,
  hasSetCookie: false,
  varyStar: false,
  ...overrides,
});

describe('Surrogate-Control, read by the surrogate etagere is', () => {
  it('announces etagere as a surrogate device token', () => {
    expect(SURROGATE_CAPABILITY).toBe('etagere="Surrogate/1.0"');
  });
  it('reads no-store and max-age, case-insensitively, with extensions and a +stale part', () => {
    expect(parseSurrogateControl('max-age=3600')).toEqual({ noStore: false, maxAge: 3600 });
    expect(parseSurrogateControl('MaX-aGe=3600')).toEqual({ noStore: false, maxAge: 3600 });
    expect(parseSurrogateControl('foobar, max-age=60+600')).toEqual({ noStore: false, maxAge: 60 });
    expect(parseSurrogateControl('no-store')).toEqual({ noStore: true, maxAge: undefined });
    expect(parseSurrogateControl(['max-age=5', 'no-store'])).toEqual({ noStore: true, maxAge: 5 });
    expect(parseSurrogateControl('max-age=99999999999')).toEqual({ noStore: false, maxAge: 2_147_483_648 });
  });
  it('takes directives targeted at etagere over untargeted ones, and ignores those for other devices', () => {
    expect(parseSurrogateControl('max-age=3600;etagere')).toEqual({ noStore: false, maxAge: 3600 });
    expect(parseSurrogateControl('max-age=3600;not-for-you')).toBeUndefined();
    expect(parseSurrogateControl('max-age=10, max-age=3600;etagere')).toEqual({ noStore: false, maxAge: 3600 });
    expect(parseSurrogateControl('no-store;other, max-age=60')).toEqual({ noStore: false, maxAge: 60 });
  });
  it('ignores what it cannot read: spaces around =, a value that is not delta-seconds, nothing at all', () => {
    expect(parseSurrogateControl('max-age =100')).toBeUndefined();
    expect(parseSurrogateControl('max-age= 100')).toBeUndefined();
    expect(parseSurrogateControl('max-age=-1, max-age=1.5, max-age=')).toBeUndefined();
    expect(parseSurrogateControl('content="ESI/1.0"')).toBeUndefined();
    expect(parseSurrogateControl('')).toBeUndefined();
    expect(parseSurrogateControl(undefined)).toBeUndefined();
  });
  it('no-store forbids storing whatever Cache-Control says', () => {
    const res = withSurrogate(parseCacheControl('max-age=10000'), parseSurrogateControl('no-store'));
    expect(notStorableReason(policy('rfc9111'), input({ res, hasExpires: true }))).toBe('no-store');
  });
  it("max-age replaces Cache-Control's freshness and storage directives", () => {
    const stored = withSurrogate(parseCacheControl('no-store, private, no-cache, s-maxage=1'), parseSurrogateControl('max-age=10000'));
    expect(notStorableReason(policy('rfc9111'), input({ res: stored }))).toBeNull();
    expect(freshnessLifetime(policy('rfc9111'), { res: stored, date: undefined, expires: undefined, lastModified: undefined })).toBe(
      10_000,
    );
    expect(staleWindows(policy('rfc9111'), stored).mustRevalidate).toBe(false);
    const shorter = withSurrogate(parseCacheControl('max-age=3600'), parseSurrogateControl('max-age=1'));
    expect(freshnessLifetime(policy('rfc9111'), { res: shorter, date: 0, expires: 10_000_000, lastModified: undefined })).toBe(1);
  });
  it('leaves Cache-Control alone when nothing is aimed at etagere', () => {
    const cc = parseCacheControl('max-age=60');
    expect(withSurrogate(cc, undefined)).toBe(cc);
    expect(withSurrogate(cc, parseSurrogateControl('no-store;cdn'))).toBe(cc);
  });
});

describe('rfc9111: which statuses are stored', () => {
  it('stores any final status with explicit freshness: max-age, s-maxage or Expires', () => {
    for (const status of [201, 299, 302, 303, 307, 400, 403, 499, 500, 502, 503, 504, 599]) {
      expect(notStorableReason(policy('rfc9111'), input({ status, res: { maxAge: 60 } })), String(status)).toBeNull();
      expect(notStorableReason(policy('rfc9111'), input({ status, res: { sMaxage: 60 } })), String(status)).toBeNull();
      expect(notStorableReason(policy('rfc9111'), input({ status, res: {}, hasExpires: true })), String(status)).toBeNull();
    }
  });
  it('stores other statuses without explicit freshness only when public (heuristic freshness then)', () => {
    const heuristic = policy('rfc9111', 0.1);
    for (const status of [302, 307, 500, 599]) {
      expect(notStorableReason(heuristic, input({ status, res: {}, hasValidator: true })), String(status)).toBe('status');
      expect(notStorableReason(heuristic, input({ status, res: { public: true }, hasValidator: true })), String(status)).toBeNull();
    }
    for (const status of [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]) {
      expect(notStorableReason(heuristic, input({ status, res: {}, hasValidator: true })), String(status)).toBeNull();
    }
  });
  it('never stores an interim, a partial or a 304 response, whatever it says', () => {
    for (const status of [100, 103, 206, 304]) {
      expect(notStorableReason(policy('rfc9111'), input({ status, res: { maxAge: 60, public: true } })), String(status)).toBe('status');
    }
  });
  it('must-understand: stores only a status whose caching rules it knows', () => {
    const res = parseCacheControl('max-age=60, must-understand');
    expect(res.mustUnderstand).toBe(true);
    expect(notStorableReason(policy('rfc9111'), input({ status: 599, res }))).toBe('must-understand');
    expect(notStorableReason(policy('rfc9111'), input({ status: 299, res }))).toBe('must-understand');
    expect(notStorableReason(policy('rfc9111'), input({ status: 200, res }))).toBeNull();
  });
  it('the GitHub policies still store 200s only', () => {
    for (const kind of ['max-age', 'revalidate', 'ttl'] as const) {
      expect(notStorableReason(policy(kind), input({ status: 302 }))).toBe('status');
      expect(notStorableReason(policy(kind), input({ status: 500 }))).toBe('status');
    }
  });
});

describe('rfc9111: Expires without a valid Date', () => {
  const received = Date.UTC(2026, 0, 1);
  const input = { res: {}, date: undefined, expires: received + 10_000, lastModified: undefined, received };
  it('counts Expires from the time the response was received (RFC 9110 section 6.6.1)', () => {
    expect(freshnessLifetime(policy('rfc9111'), input)).toBe(10);
    expect(freshnessLifetime(policy('rfc9111'), { ...input, expires: received - 10_000 })).toBe(0);
    expect(freshnessLifetime(policy('rfc9111'), { ...input, date: received - 5_000 })).toBe(15);
  });
  it('the GitHub policies keep such a response stale', () => {
    expect(freshnessLifetime(policy('max-age'), input)).toBe(0);
  });
});

describe('config/examples/rfc9111.yaml', () => {
  it('is a generic shared cache in front of UPSTREAM_URL: rfc9111, heuristic freshness, other methods passed through', () => {
    const config = loadConfig({ file: 'config/examples/rfc9111.yaml', env: { UPSTREAM_URL: 'http://origin.internal:8000' } });
    expect(config.upstreams).toHaveLength(1);
    expect(config.upstreams[0]).toMatchObject({ url: 'http://origin.internal:8000', prefix: '/', pass_through: true });
    expect(config.upstreams[0]!.cache).toMatchObject({ policy: 'rfc9111', heuristic_fraction: 0.1, stale_while_revalidate_seconds: 0 });
    expect(config.pool.tokens).toEqual([]);
  });
});
