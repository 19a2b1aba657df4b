/**
 * A consumer key in any credential position (src/pool/consumers/consumers.ts, src/pool/consumers/credential.ts):
 * `token <key>`, `Bearer <key>`, the user or the password of Basic credentials, a bare value, or
 * X-Etagere-Key identifies its consumer and is taken out of what goes upstream. A client's own
 * token is looked at once per connection: the same value again costs no digest.
 */
import { hash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, expect, it } from 'vitest';
import { requestHeadersForUpstream } from '../../src/http/headers/hop-by-hop.js';
import { dropConsumerKeys, resolveCredential, type CredentialRules } from '../../src/pool/consumers/credential.js';
import { authorizationValues, createConsumers, type Consumers } from '../../src/pool/consumers/consumers.js';
import { identify, verdict, type Identified } from '../../src/pool/consumers/gate.js';

const WEB = 'key-web-0123456789';
const BATCH = 'key-batch-abcdef';
const KEYS = [
  { name: 'web', value: WEB },
  { name: 'batch', value: BATCH },
];
const OWN = 'ghp_clientsOwnToken0123456789abcdefABCD';
const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** Consumers whose digests of presented values are counted (not those of the configured keys). */
function counted() {
  let digests = -KEYS.length;
  const consumers = createConsumers(KEYS, (value) => {
    digests++;
    return hash('sha256', value, 'base64');
  });
  return { consumers, digests: () => digests };
}

describe('the values of an Authorization header that may be a key', () => {
  it('each word, and the user and password of Basic credentials', () => {
    expect(authorizationValues(`token ${WEB}`)).toEqual(['token', WEB]);
    expect(authorizationValues(`Bearer  ${WEB}  `)).toEqual(['Bearer', WEB]);
    expect(authorizationValues(WEB)).toEqual([WEB]);
    expect(authorizationValues(basic(WEB, ''))).toEqual(['Basic', Buffer.from(`${WEB}:`).toString('base64'), WEB, '']);
    expect(authorizationValues(basic('octocat', `pass:with:${WEB}`)).slice(2)).toEqual(['octocat', `pass:with:${WEB}`]);
    expect(authorizationValues(`BASIC ${Buffer.from(WEB).toString('base64')}`).slice(2)).toEqual([WEB]);
  });
});

describe('a key in Authorization', () => {
  const { consumers } = counted();
  it.each([
    ['token', `token ${WEB}`],
    ['Bearer', `Bearer ${WEB}`],
    ['the scheme in capitals', `TOKEN ${WEB}`],
    ['Basic user', basic(WEB, '')],
    ['Basic user with a password', basic(WEB, 'x')],
    ['Basic password', basic('octocat', WEB)],
    ['a bare value', WEB],
    ['a word after junk', `token junk ${WEB}`],
  ])('is its consumer: %s', (_what, authorization) => {
    expect(consumers.inAuthorization(authorization)).toEqual({ kind: 'consumer', name: 'web' });
    expect(consumers.inAuthorization(authorization, {})).toEqual({ kind: 'consumer', name: 'web' });
  });

  it('hostile: a prefix, a suffix, another case, one character off or a key inside a longer word is not a key', () => {
    const near = [WEB.slice(0, -1), WEB.slice(1), `${WEB}x`, `x${WEB}`, WEB.toUpperCase(), `${WEB.slice(0, -1)}8`, `${WEB}${BATCH}`];
    for (const value of near)
      for (const authorization of [`token ${value}`, `Bearer ${value}`, basic(value, ''), basic('octocat', value), value])
        expect(consumers.inAuthorization(authorization, {}), authorization).toEqual({ kind: 'none' });
    expect(consumers.inAuthorization(`token ${OWN}`)).toEqual({ kind: 'none' });
    expect(consumers.inAuthorization(basic('octocat', `${WEB}:more`))).toEqual({ kind: 'none' });
  });
});

describe('a client’s own token on a keep-alive connection', () => {
  it('costs its digests once per connection, not once per request', () => {
    const { consumers, digests } = counted();
    const connection = {};
    expect(consumers.inAuthorization(`token ${OWN}`, connection)).toEqual({ kind: 'none' });
    const first = digests();
    expect(first).toBeGreaterThan(0);
    for (let request = 0; request < 100; request++) expect(consumers.inAuthorization(`token ${OWN}`, connection)).toEqual({ kind: 'none' });
    expect(digests()).toBe(first);
    // Another connection, or no connection, looks again.
    consumers.inAuthorization(`token ${OWN}`, {});
    consumers.inAuthorization(`token ${OWN}`);
    expect(digests()).toBe(3 * first);
  });

  it('hostile: after a client token, a key on the same connection is still its consumer, and the other way round', () => {
    const { consumers } = counted();
    const connection = {};
    const sequence: Array<[string, string]> = [
      [`token ${OWN}`, 'none'],
      [`token ${WEB}`, 'web'],
      [`token ${OWN}`, 'none'],
      [basic('octocat', BATCH), 'batch'],
      [basic('octocat', BATCH), 'batch'],
      [`token ${WEB}x`, 'none'],
      [`token ${WEB}`, 'web'],
      [`token ${OWN.slice(0, -1)}`, 'none'],
    ];
    for (const [authorization, expected] of sequence) {
      const identity = consumers.inAuthorization(authorization, connection);
      expect(identity.kind === 'consumer' ? identity.name : identity.kind, authorization).toBe(expected);
    }
  });

  it('a value too long to remember is looked at every time, and still told right', () => {
    const { consumers, digests } = counted();
    const connection = {};
    const long = `token ${'a'.repeat(5000)}`;
    consumers.inAuthorization(long, connection);
    const once = digests();
    consumers.inAuthorization(long, connection);
    expect(digests()).toBe(2 * once);
    expect(consumers.inAuthorization(`token ${WEB}`, connection)).toEqual({ kind: 'consumer', name: 'web' });
  });
});

describe('whose credential: a key anywhere uses the pool and never goes upstream', () => {
  const { consumers } = counted();
  const guarded: CredentialRules = { pooled: true, consumers, unknown: 'reject' };
  const positions: Array<[string, IncomingHttpHeaders]> = [
    ['token', { authorization: `token ${BATCH}` }],
    ['Bearer', { authorization: `Bearer ${BATCH}` }],
    ['Basic user', { authorization: basic(BATCH, '') }],
    ['Basic password', { authorization: basic('octocat', BATCH) }],
    ['X-Etagere-Key', { 'x-etagere-key': BATCH }],
  ];

  it.each(positions)('%s: that consumer, the same whether blanked or deleted, nothing of it in the upstream copy', (_what, headers) => {
    const placed: IncomingHttpHeaders = { accept: 'application/json', ...headers, 'user-agent': 'ua' };
    const deleted = { ...placed };
    const blanked = { ...placed };
    expect(resolveCredential(deleted, guarded)).toEqual({ kind: 'pool', consumer: 'batch' });
    expect(resolveCredential(blanked, guarded, 'blank', {})).toEqual({ kind: 'pool', consumer: 'batch' });
    for (const copy of [requestHeadersForUpstream(deleted, true), requestHeadersForUpstream(blanked, true)]) {
      expect(copy.authorization).toBeUndefined();
      expect(copy['x-etagere-key']).toBeUndefined();
    }
  });

  it('X-Etagere-Key names the consumer when Authorization holds another key; both are taken out', () => {
    const headers: IncomingHttpHeaders = { 'x-etagere-key': WEB, authorization: `token ${BATCH}` };
    expect(resolveCredential(headers, guarded)).toEqual({ kind: 'pool', consumer: 'web' });
    expect(headers.authorization).toBeUndefined();
    const wrongFirst: IncomingHttpHeaders = { 'x-etagere-key': `${WEB}x`, authorization: `Bearer ${BATCH}` };
    expect(resolveCredential(wrongFirst, guarded)).toEqual({ kind: 'pool', consumer: 'batch' });
  });

  it('hostile: a client’s own token stays the client’s, next to a key or not; a near-key is a client’s too', () => {
    const own: IncomingHttpHeaders = { authorization: `token ${OWN}`, 'x-etagere-key': WEB };
    expect(resolveCredential(own, guarded)).toEqual({ kind: 'client' });
    expect(own.authorization).toBe(`token ${OWN}`);
    expect(own['x-etagere-key']).toBeUndefined();
    expect(resolveCredential({ authorization: `token ${WEB.toUpperCase()}` }, guarded)).toEqual({ kind: 'client' });
    // Without a pool, a key in Authorization is still taken out: anonymous, never the key upstream.
    const unpooled: IncomingHttpHeaders = { authorization: `token ${WEB}` };
    expect(resolveCredential(unpooled, { ...guarded, pooled: false })).toEqual({ kind: 'anonymous' });
    expect(unpooled.authorization).toBeUndefined();
  });

  it('a passed-through request loses every key, and keeps a client’s own token', () => {
    for (const [, headers] of positions) {
      const copy: IncomingHttpHeaders = { ...headers, 'content-type': 'application/json' };
      dropConsumerKeys(copy, consumers, {});
      expect(copy).toEqual({ 'content-type': 'application/json' });
    }
    const own: IncomingHttpHeaders = { authorization: `token ${OWN}`, 'x-etagere-key': WEB };
    dropConsumerKeys(own, consumers);
    expect(own).toEqual({ authorization: `token ${OWN}` });
    const off: IncomingHttpHeaders = { authorization: `token ${WEB}`, 'x-etagere-key': WEB };
    dropConsumerKeys(off, undefined);
    expect(off).toEqual({ authorization: `token ${WEB}` }); // consumer keys off: nothing is a key
  });
});

describe('a key the consumer gate matched', () => {
  /** Consumers whose `match` and `inAuthorization` calls are counted. */
  function matchCounted() {
    const consumers = createConsumers(KEYS);
    const calls = { match: 0, inAuthorization: 0 };
    const counting: Consumers = {
      ...consumers,
      match: (key: string, connection?: object) => (calls.match++, consumers.match(key, connection)),
      inAuthorization: (value: string, connection?: object) => (calls.inAuthorization++, consumers.inAuthorization(value, connection)),
    };
    return { consumers: counting, calls };
  }
  const rules = (consumers: CredentialRules['consumers']): CredentialRules => ({ pooled: true, consumers, unknown: 'reject' });

  it('is matched once a request: the gate finds it, the credential takes the gate’s consumer', () => {
    const { consumers, calls } = matchCounted();
    const connection = {};
    for (let request = 0; request < 3; request++) {
      const headers: IncomingHttpHeaders = { 'x-etagere-key': WEB };
      const identified = identify(headers, consumers, undefined, connection);
      const found = verdict(identified as Identified, 'GET', '/repos/o/r');
      expect(resolveCredential(headers, rules(consumers), 'blank', connection, found.oidc, found.key)).toEqual({
        kind: 'pool',
        consumer: 'web',
      });
      expect(requestHeadersForUpstream(headers, true)).not.toHaveProperty('x-etagere-key');
    }
    expect(calls.match).toBe(3);
    expect(calls.inAuthorization).toBe(0);
  });

  it('hostile: another key in Authorization next to it still never goes upstream; a key in Authorization is taken out', () => {
    const { consumers } = matchCounted();
    const both: IncomingHttpHeaders = { 'x-etagere-key': WEB, authorization: `token ${BATCH}` };
    const found = verdict(identify(both, consumers, undefined, {}) as Identified, 'GET', '/');
    expect(resolveCredential(both, rules(consumers), 'blank', {}, found.oidc, found.key)).toEqual({ kind: 'pool', consumer: 'web' });
    expect(requestHeadersForUpstream(both, false)).not.toHaveProperty('authorization');
    const inAuthorization: IncomingHttpHeaders = { authorization: basic(BATCH, '') };
    const again = verdict(identify(inAuthorization, consumers, undefined, {}) as Identified, 'GET', '/');
    expect(resolveCredential(inAuthorization, rules(consumers), 'blank', {}, again.oidc, again.key)).toEqual({
      kind: 'pool',
      consumer: 'batch',
    });
    expect(requestHeadersForUpstream(inAuthorization, false)).not.toHaveProperty('authorization');
    // A client's own token next to a key stays the client's: it goes upstream, the key does not.
    const own: IncomingHttpHeaders = { 'x-etagere-key': WEB, authorization: `token ${OWN}` };
    const mine = verdict(identify(own, consumers, undefined, {}) as Identified, 'GET', '/');
    expect(resolveCredential(own, rules(consumers), 'blank', {}, mine.oidc, mine.key)).toEqual({ kind: 'client' });
    expect(requestHeadersForUpstream(own, false)).toEqual({ authorization: `token ${OWN}` });
  });
});
