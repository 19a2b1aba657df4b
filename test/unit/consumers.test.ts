import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/platform/config/load.js';
import { requestHeadersForUpstream } from '../../src/http/headers/hop-by-hop.js';
import { resolveCredential, type CredentialRules } from '../../src/pool/consumers/credential.js';
import { authorizationValues, createConsumers, sameKey } from '../../src/pool/consumers/consumers.js';

const consumers = createConsumers([
  { name: 'web', value: 'key-web-0123456789' },
  { name: 'batch', value: 'key-batch-abcdef' },
]);
const basic = (user: string, pass = '') => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

describe('consumer keys', () => {
  it('matches a known key to its consumer and nothing else', () => {
    expect(consumers.match('key-web-0123456789')).toEqual({ kind: 'consumer', name: 'web' });
    expect(consumers.match('key-batch-abcdef')).toEqual({ kind: 'consumer', name: 'batch' });
    expect(consumers.match('key-web-012345678')).toEqual({ kind: 'unknown' });
    expect(consumers.match('')).toEqual({ kind: 'unknown' });
  });
  it('reads the user of Basic credentials', () => {
    expect(authorizationValues(basic('key-web', 'x'))).toContain('key-web');
    expect(authorizationValues(basic('only'))).toContain('only');
    expect(authorizationValues('token abc')).toEqual(['token', 'abc']);
  });
});

describe('a key sent again on one connection (no digest per request)', () => {
  it('the same key on a connection is its consumer again; any other key is matched on its own', () => {
    const fresh = createConsumers([
      { name: 'web', value: 'key-web-0123456789' },
      { name: 'batch', value: 'key-batch-abcdef' },
    ]);
    const connection = {};
    for (let round = 0; round < 3; round++)
      expect(fresh.match('key-web-0123456789', connection)).toEqual({ kind: 'consumer', name: 'web' });
    // Behind a front proxy one connection carries several clients: each gets its own consumer, or none.
    expect(fresh.match('key-batch-abcdef', connection)).toEqual({ kind: 'consumer', name: 'batch' });
    expect(fresh.match('key-web-0123456789', connection)).toEqual({ kind: 'consumer', name: 'web' });
    for (const wrong of ['key-web-012345678', 'key-web-01234567890', 'key-web-0123456788', 'Key-web-0123456789', ''])
      expect(fresh.match(wrong, connection)).toEqual({ kind: 'unknown' });
    // A key that matched nothing is not remembered: the connection's key still matches as before.
    expect(fresh.match('key-web-0123456789', connection)).toEqual({ kind: 'consumer', name: 'web' });
    expect(fresh.match('key-web-0123456789', {})).toEqual({ kind: 'consumer', name: 'web' });
  });

  it('hostile: a key remembered on one connection never matches on another', () => {
    const fresh = createConsumers([{ name: 'web', value: 'key-web-0123456789' }]);
    const first = {};
    expect(fresh.match('key-web-0123456789', first)).toEqual({ kind: 'consumer', name: 'web' });
    expect(fresh.match('key-web-012345678x', {})).toEqual({ kind: 'unknown' });
    expect(fresh.match('key-web-012345678x', first)).toEqual({ kind: 'unknown' });
  });

  it('sameKey is equality, whatever the lengths and where the keys differ', () => {
    expect(sameKey('key-web-0123456789', 'key-web-0123456789')).toBe(true);
    for (const other of ['key-web-0123456788', 'xey-web-0123456789', 'key-web-012345678', 'key-web-01234567890', '', 'k'])
      expect(sameKey(other, 'key-web-0123456789')).toBe(false);
    // A presented key that repeats the known one is longer, not equal.
    expect(sameKey('key-web-0123456789key-web-0123456789', 'key-web-0123456789')).toBe(false);
  });

  it('resolves the same pool credential on a connection as without one, and keeps the key out of the upstream copy', () => {
    const rules: CredentialRules = { pooled: true, consumers, unknown: 'reject' };
    const connection = {};
    for (let round = 0; round < 2; round++) {
      const headers: IncomingHttpHeaders = { 'x-etagere-key': 'key-batch-abcdef', accept: 'application/json' };
      expect(resolveCredential(headers, rules, 'blank', connection)).toEqual({ kind: 'pool', consumer: 'batch' });
      expect(JSON.stringify(requestHeadersForUpstream(headers, true))).not.toContain('key-batch');
    }
    expect(resolveCredential({ 'x-etagere-key': 'key-batch-abcdeg' }, rules, 'blank', connection)).toBeUndefined();
  });
});

describe('whose credential goes upstream', () => {
  const open: CredentialRules = { pooled: true, consumers: undefined, unknown: 'reject' };
  const guarded: CredentialRules = { pooled: true, consumers, unknown: 'reject' };
  const lenient: CredentialRules = { ...guarded, unknown: 'anonymous' };
  const run = (headers: IncomingHttpHeaders, rules: CredentialRules) => {
    const forwarded = { ...headers };
    return { cred: resolveCredential(forwarded, rules), headers: forwarded };
  };
  it('without access control: own credential, else the pool, else anonymous', () => {
    expect(run({ authorization: 'token mine' }, open).cred).toEqual({ kind: 'client' });
    expect(run({}, open).cred).toEqual({ kind: 'pool', consumer: undefined });
    expect(run({}, { ...open, pooled: false }).cred).toEqual({ kind: 'anonymous' });
  });
  it('never forwards a consumer key', () => {
    expect(run({ 'x-etagere-key': 'key-web-0123456789' }, open).headers['x-etagere-key']).toBeUndefined();
    const resolved = run({ authorization: basic('key-web-0123456789') }, guarded);
    expect(resolved.cred).toEqual({ kind: 'pool', consumer: 'web' });
    expect(resolved.headers.authorization).toBeUndefined();
    // Not even next to an X-Etagere-Key (found by test/hardening/fuzz.test.ts).
    const both = run({ 'x-etagere-key': 'junk', authorization: basic('key-web-0123456789') }, guarded);
    expect(both.cred).toEqual({ kind: 'pool', consumer: 'web' });
    expect(both.headers.authorization).toBeUndefined();
  });
  it('with access control: a known key uses the pool, others are refused or anonymous', () => {
    expect(run({ 'x-etagere-key': 'key-batch-abcdef' }, guarded).cred).toEqual({ kind: 'pool', consumer: 'batch' });
    expect(run({ 'x-etagere-key': 'wrong' }, guarded).cred).toBeUndefined();
    expect(run({}, guarded).cred).toBeUndefined();
    expect(run({}, lenient).cred).toEqual({ kind: 'anonymous' });
    // A Basic credential that is not a consumer key is the client's own (e.g. user:token for GitHub).
    expect(run({ authorization: basic('octocat', 'ghp_x') }, guarded).cred).toEqual({ kind: 'client' });
    // Upstreams without a pool are not guarded.
    expect(run({}, { ...guarded, pooled: false }).cred).toEqual({ kind: 'anonymous' });
  });
  it('a GET or HEAD takes the key out by blanking it: same credential, and nothing of it in the upstream copy', () => {
    // The key in the middle of the headers, as clients send it (a delete there would make the map a dictionary).
    const cases: Array<[IncomingHttpHeaders, CredentialRules]> = [
      [{ accept: 'application/json', 'x-etagere-key': 'key-web-0123456789', 'user-agent': 'ua' }, guarded],
      [{ accept: 'application/json', 'x-etagere-key': 'wrong', 'user-agent': 'ua' }, guarded],
      [{ accept: 'application/json', authorization: basic('key-batch-abcdef'), 'user-agent': 'ua' }, guarded],
      [{ accept: 'application/json', authorization: '  ', 'user-agent': 'ua' }, lenient],
      [{ accept: 'application/json', 'x-etagere-key': 'junk', authorization: 'token mine', 'user-agent': 'ua' }, guarded],
      [{ 'x-etagere-key': 'key-web-0123456789', 'user-agent': 'ua' }, open],
    ];
    for (const [headers, rules] of cases) {
      const deleted = { ...headers };
      const blanked = { ...headers };
      const cred = resolveCredential(blanked, rules, 'blank');
      expect(cred).toEqual(resolveCredential(deleted, rules));
      for (const name of ['x-etagere-key', 'authorization']) expect(blanked[name]).toBe(deleted[name]);
      expect(requestHeadersForUpstream(blanked, cred?.kind === 'pool')).toEqual(requestHeadersForUpstream(deleted, cred?.kind === 'pool'));
      expect(JSON.stringify(requestHeadersForUpstream(blanked))).not.toMatch(/key-(web|batch)|junk|wrong/);
    }
  });
});

describe('fair-share settings of consumer keys', () => {
  const base = { upstreams: [{ name: 'gh', prefix: '/', url: 'http://x', token_pool: true }] };
  const withKeys = (keys: unknown[], extra: Record<string, unknown> = {}) =>
    parseConfig({ ...base, consumers: { enabled: true, keys, ...extra } });
  it('defaults: weight 1, no caps, a reserve of half of each share', () => {
    const config = withKeys([{ name: 'web', value: 'key-web-0123456789' }]);
    expect(config.consumers.keys[0]).toMatchObject({ weight: 1, max_per_hour: null, max_concurrency: null });
    expect(config.consumers.reserve_fraction).toBe(0.5);
  });
  it('takes weights and caps as given', () => {
    const config = withKeys([{ name: 'web', value: 'key-web-0123456789', weight: 2.5, max_per_hour: 1000, max_concurrency: 4 }], {
      reserve_fraction: 0.2,
    });
    expect(config.consumers.keys[0]).toMatchObject({ weight: 2.5, max_per_hour: 1000, max_concurrency: 4 });
    expect(config.consumers.reserve_fraction).toBe(0.2);
  });
  it.each([
    [
      'a weight of 0',
      [{ name: 'web', value: 'key-web-0123456789', weight: 0 }],
      {},
      /consumers\.keys\.0\.weight|consumers\.keys\[0\]\.weight/,
    ],
    ['a negative weight', [{ name: 'web', value: 'key-web-0123456789', weight: -1 }], {}, /weight/],
    ['a huge weight', [{ name: 'web', value: 'key-web-0123456789', weight: 1e9 }], {}, /weight/],
    ['a weight that is a string', [{ name: 'web', value: 'key-web-0123456789', weight: '3' }], {}, /weight/],
    ['a negative max_per_hour', [{ name: 'web', value: 'key-web-0123456789', max_per_hour: -1 }], {}, /max_per_hour/],
    ['a fractional max_concurrency', [{ name: 'web', value: 'key-web-0123456789', max_concurrency: 1.5 }], {}, /max_concurrency/],
    ['a max_concurrency of 0', [{ name: 'web', value: 'key-web-0123456789', max_concurrency: 0 }], {}, /max_concurrency/],
    ['an unknown key in an entry', [{ name: 'web', value: 'key-web-0123456789', share: 0.5 }], {}, /share|unrecognized/i],
    ['a reserve_fraction over 1', [{ name: 'web', value: 'key-web-0123456789' }], { reserve_fraction: 1.5 }, /reserve_fraction/],
    ['a negative reserve_fraction', [{ name: 'web', value: 'key-web-0123456789' }], { reserve_fraction: -0.1 }, /reserve_fraction/],
  ])('refuses %s, naming the key and never the key value', (_what, keys, extra, message) => {
    let error: unknown;
    try {
      withKeys(keys, extra);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('key-web-0123456789');
  });
});
