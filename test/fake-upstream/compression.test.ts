/**
 * Compression on the fake upstream: gzip when the request's Accept-Encoding takes it, as GitHub
 * serves it; the same weak ETag for both codings; HEAD and 304; the bad-gzip fault; and the
 * `noTransform` setting (Cache-Control: no-transform on resource and list answers).
 */
import { gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { acceptsGzip } from '../../fake-github/compression.js';
import { ALICE_REPO, auth, useFake } from './helpers.js';
import { sendRaw as send } from '../helpers/raw-request.js';

const LIST = '/orgs/etagere-org/repos?per_page=100';

describe('fake upstream: gzip', () => {
  const fake = useFake();

  afterEach(async () => {
    await fetch(`${fake.url}/__fake/faults`, { method: 'DELETE' });
  });

  it('gzips a list page for a client that accepts gzip, with the same content and ETag as identity', async () => {
    const identity = await send(`${fake.url}${LIST}`, auth(ALICE_REPO));
    const gzip = await send(`${fake.url}${LIST}`, { ...auth(ALICE_REPO), 'accept-encoding': 'gzip, deflate, br' });
    expect(identity.status).toBe(200);
    expect(identity.headers['content-encoding']).toBeUndefined();
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.headers.vary).toMatch(/Accept-Encoding/);
    expect(Number(gzip.headers['content-length'])).toBe(gzip.body.length);
    expect(gunzipSync(gzip.body).equals(identity.body)).toBe(true);
    expect(gzip.body.length).toBeLessThan(identity.body.length / 5);
    expect(gzip.headers.etag).toBe(identity.headers.etag);
    expect(gzip.headers.etag).toMatch(/^W\//);
  });

  it('HEAD gives the gzipped length; a 304 answers either coding with no body and no Content-Encoding', async () => {
    const headers = { ...auth(ALICE_REPO), 'accept-encoding': 'gzip' };
    const full = await send(`${fake.url}/repos/octocat/hello-world`, headers);
    const head = await send(`${fake.url}/repos/octocat/hello-world`, headers, 'HEAD');
    expect(head.headers['content-length']).toBe(String(full.body.length));
    expect(head.headers['content-encoding']).toBe('gzip');
    expect(head.body.length).toBe(0);
    const etag = String(full.headers.etag);
    for (const coding of ['gzip', 'identity']) {
      const again = await send(`${fake.url}/repos/octocat/hello-world`, {
        ...auth(ALICE_REPO),
        'accept-encoding': coding,
        'if-none-match': etag,
      });
      expect(again.status).toBe(304);
      expect(again.headers['content-encoding']).toBeUndefined();
    }
  });

  it('reads Accept-Encoding as RFC 9110 says: q=0 refuses, * accepts, names are case-insensitive', () => {
    expect(acceptsGzip('gzip')).toBe(true);
    expect(acceptsGzip('GZIP;q=0.5')).toBe(true);
    expect(acceptsGzip('*')).toBe(true);
    expect(acceptsGzip(['br', 'gzip'])).toBe(true);
    expect(acceptsGzip('gzip;q=0')).toBe(false);
    expect(acceptsGzip('*, gzip;q=0')).toBe(false);
    expect(acceptsGzip('*;q=0')).toBe(false);
    expect(acceptsGzip('identity')).toBe(false);
    expect(acceptsGzip('gzip;q=nonsense')).toBe(false);
    expect(acceptsGzip(undefined)).toBe(false);
  });

  it('errors stay identity', async () => {
    const missing = await send(`${fake.url}/repos/octocat/nope-nope`, { ...auth(ALICE_REPO), 'accept-encoding': 'gzip' });
    expect(missing.status).toBe(404);
    expect(missing.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(missing.body.toString('utf8'))).toHaveProperty('message');
  });

  it('bad-gzip: a gzip body that fails to decode, whatever the request accepts', async () => {
    await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults: [{ kind: 'bad-gzip' }] }) });
    for (const coding of ['gzip', 'identity']) {
      const bad = await send(`${fake.url}/repos/octocat/hello-world`, { ...auth(ALICE_REPO), 'accept-encoding': coding });
      expect(bad.status).toBe(200);
      expect(bad.headers['content-encoding']).toBe('gzip');
      expect(Number(bad.headers['content-length'])).toBe(bad.body.length);
      expect(() => gunzipSync(bad.body)).toThrow();
    }
  });

  it('bad-json keeps the coding: a gzipped answer decodes to a body that is not JSON', async () => {
    await fetch(`${fake.url}/__fake/faults`, { method: 'POST', body: JSON.stringify({ faults: [{ kind: 'bad-json' }] }) });
    const bad = await send(`${fake.url}/repos/octocat/hello-world`, { ...auth(ALICE_REPO), 'accept-encoding': 'gzip' });
    expect(bad.headers['content-encoding']).toBe('gzip');
    expect(() => JSON.parse(gunzipSync(bad.body).toString('utf8'))).toThrow();
  });

  it('noTransform: resource and list answers (200 and 304) carry no-transform, in either coding; bad values are a 400', async () => {
    const set = (value: unknown) => fetch(`${fake.url}/__fake/config`, { method: 'POST', body: JSON.stringify({ noTransform: value }) });
    try {
      expect((await set('yes')).status).toBe(400);
      expect((await set(true)).status).toBe(200);
      const gzip = await send(`${fake.url}/repos/octocat/hello-world`, { ...auth(ALICE_REPO), 'accept-encoding': 'gzip' });
      const identity = await send(`${fake.url}${LIST}`, { ...auth(ALICE_REPO), 'accept-encoding': 'gzip;q=0, identity;q=0' });
      const again = await send(`${fake.url}/repos/octocat/hello-world`, {
        ...auth(ALICE_REPO),
        'if-none-match': String(gzip.headers.etag),
      });
      expect(gzip.headers['content-encoding']).toBe('gzip');
      expect(identity.status).toBe(200); // nothing acceptable: identity, as GitHub answers (no 406)
      expect(identity.headers['content-encoding']).toBeUndefined();
      expect(again.status).toBe(304);
      for (const answer of [gzip, identity, again])
        expect(answer.headers['cache-control']).toBe('private, max-age=60, s-maxage=60, no-transform');
      const missing = await send(`${fake.url}/repos/octocat/nope-nope`, auth(ALICE_REPO));
      expect(missing.headers['cache-control'] ?? '').not.toMatch(/no-transform/);
    } finally {
      await set(false);
    }
    const plain = await send(`${fake.url}/repos/octocat/hello-world`, auth(ALICE_REPO));
    expect(plain.headers['cache-control']).toBe('private, max-age=60, s-maxage=60');
  });
});
