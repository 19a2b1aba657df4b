/**
 * Which validators a revalidation sends (src/cache/rules/freshen.ts), and who fetched an entry as
 * its `fetchedBy` records it (src/cache/rules/entry.ts): the ETag as always; If-Modified-Since only for
 * an entry that the same pool token fetched with another value, under `last_modified`, when its
 * Last-Modified is at least a second older than its Date.
 */
import { describe, expect, it } from 'vitest';
import { poolTokenOf, type CacheEntry, type FetchedBy } from '../../src/cache/rules/entry.js';
import { lastModifiedValidates, storedValidators, validatorsFor, type StoredValidators } from '../../src/cache/rules/freshen.js';

const MODIFIED = 'Mon, 01 Jan 2024 00:00:00 GMT';
const stored: StoredValidators = {
  etag: 'W/"old-value-etag"',
  lastModified: MODIFIED,
  date: 'Tue, 02 Jan 2024 00:00:00 GMT',
  token: 'ci-app-1001',
  credential: 'id-old',
};
const reminted = { name: 'ci-app-1001', credential: 'id-new' };

describe('validatorsFor', () => {
  it('sends If-Modified-Since for an entry its token fetched with another value, under last_modified', () => {
    expect(validatorsFor(stored, reminted, 'last_modified')).toEqual({ 'if-modified-since': MODIFIED });
  });

  it('sends the ETag otherwise: same value, another token, the default mode, no recorded value', () => {
    const etag = { 'if-none-match': stored.etag };
    expect(validatorsFor(stored, { ...reminted, credential: 'id-old' }, 'last_modified')).toEqual(etag);
    // A switch to another member: its scopes and view may differ, so only the ETag may confirm the body.
    expect(validatorsFor(stored, { name: 'other', credential: 'id-new' }, 'last_modified')).toEqual(etag);
    expect(validatorsFor(stored, reminted, 'etag')).toEqual(etag);
    expect(validatorsFor({ ...stored, credential: undefined }, reminted, 'last_modified')).toEqual(etag);
    expect(validatorsFor(stored, undefined, 'last_modified')).toEqual(etag);
  });

  it('hostile: a Last-Modified that is not a second older than Date, or unreadable, never stands in for the ETag', () => {
    const etag = { 'if-none-match': stored.etag };
    for (const date of [MODIFIED, 'not a date', undefined])
      expect(validatorsFor({ ...stored, date }, reminted, 'last_modified'), String(date)).toEqual(etag);
    expect(validatorsFor({ ...stored, lastModified: 'yesterday' }, reminted, 'last_modified')).toEqual(etag);
    expect(validatorsFor({ ...stored, lastModified: undefined }, reminted, 'last_modified')).toEqual(etag);
    // Date before Last-Modified (a clock gone wrong).
    expect(validatorsFor({ ...stored, date: 'Sun, 31 Dec 2023 00:00:00 GMT' }, reminted, 'last_modified')).toEqual(etag);
  });

  it('falls back to If-Modified-Since without an ETag, and sends nothing without an entry', () => {
    expect(validatorsFor({ ...stored, etag: undefined }, undefined, 'etag')).toEqual({ 'if-modified-since': MODIFIED });
    expect(validatorsFor({ ...stored, etag: undefined, lastModified: undefined }, undefined, 'etag')).toEqual({});
    expect(validatorsFor(undefined, reminted, 'last_modified')).toEqual({});
  });

  it('takes Last-Modified as a validator from one second before Date (RFC 9110 8.8.2.2)', () => {
    expect(lastModifiedValidates(MODIFIED, 'Mon, 01 Jan 2024 00:00:01 GMT')).toBe(true);
    expect(lastModifiedValidates(MODIFIED, MODIFIED)).toBe(false);
  });
});

describe('fetchedBy', () => {
  it('records a pool token by name, with the id of its value when given', () => {
    const withValue: FetchedBy = { kind: 'pool', token: 'ci-app-1001', credential: 'Ab-_12cd' };
    expect(poolTokenOf(withValue)).toBe('ci-app-1001');
    expect(poolTokenOf({ kind: 'pool', token: 'tok-1a2b3c4d' })).toBe('tok-1a2b3c4d');
    for (const other of [{ kind: 'anonymous' }, { kind: 'client', credential: 'abcd1234' }] as const)
      expect(poolTokenOf(other)).toBeUndefined();
    const base = { etag: undefined, lastModified: undefined, headers: [] } as unknown as CacheEntry;
    expect(storedValidators({ ...base, fetchedBy: withValue })).toMatchObject({ token: 'ci-app-1001', credential: 'Ab-_12cd' });
    expect(storedValidators({ ...base, fetchedBy: { kind: 'client', credential: 'abcd1234' } })).toMatchObject({
      token: undefined,
      credential: undefined,
    });
  });

  it('reads what a stored entry knows', () => {
    const entry = {
      etag: stored.etag,
      lastModified: MODIFIED,
      headers: [
        ['etag', stored.etag!],
        ['date', stored.date!],
      ],
      fetchedBy: { kind: 'pool', token: 'ci-app-1001', credential: 'id-old' },
    } as unknown as CacheEntry;
    expect(storedValidators(entry)).toEqual(stored);
  });
});
