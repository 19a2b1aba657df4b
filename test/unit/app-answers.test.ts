/**
 * The pure rules about GitHub's answers to an App (src/pool/rules/app-answers.ts): whose fault a refusal
 * is, what of GitHub's message may be repeated, the shapes of lists and tokens, and which Link
 * the App's JWT may follow.
 */
import { describe, expect, it } from 'vitest';
import { classifyAppAnswer, nextPage, parseInstallations, parseMintedToken, safeMessage } from '../../src/pool/rules/app-answers.js';

describe('classifyAppAnswer', () => {
  it.each([
    ['list', 401, undefined, 'A JSON web token could not be decoded', 'app'],
    ['mint', 401, undefined, "'Expiration time' claim ('exp') is too far in the future", 'app'],
    ['list', 404, undefined, 'Integration not found', 'app'],
    ['mint', 404, undefined, 'Integration not found', 'app'],
    ['mint', 404, undefined, 'Not Found', 'installation'],
    ['mint', 403, undefined, 'This installation has been suspended', 'installation'],
    ['mint', 403, '0', 'API rate limit exceeded for app ID 1.', 'rate-limited'],
    ['list', 403, '12', 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.', 'rate-limited'],
    ['list', 429, undefined, 'Too Many Requests', 'rate-limited'],
    ['list', 502, undefined, 'Server Error', 'upstream'],
    ['list', 404, undefined, 'Not Found', 'upstream'],
    ['mint', 422, undefined, 'Validation Failed', 'upstream'],
  ] as const)('%s %i (remaining %s) "%s" is %s', (operation, status, remaining, message, kind) => {
    expect(classifyAppAnswer(operation, { status, remaining, message }).kind).toBe(kind);
  });
});

describe('safeMessage', () => {
  it("keeps GitHub's message, and nothing credential-shaped or control characters", () => {
    expect(safeMessage({ message: 'This installation has been suspended' })).toBe('This installation has been suspended');
    const hostile = safeMessage({
      message:
        'bad eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjF9.c2lnbmF0dXJl and ghs_abcdefghijklmnopqrstuvwxyz0123456789 and MIIEpAIBAAKCAQEAxyz0123456789abcdefABCDEF\ninjected',
    });
    expect(hostile).not.toMatch(/eyJ|ghs_|MIIE|\n/);
    expect(safeMessage({ message: 'x'.repeat(500) }).length).toBeLessThanOrEqual(200);
    expect(safeMessage('not json')).toBe('(no message)');
    expect(safeMessage({ message: 42 })).toBe('(no message)');
  });
});

describe('parseInstallations and parseMintedToken', () => {
  it('reads the installation list, suspended ones marked', () => {
    expect(
      parseInstallations([
        { id: 1, account: { login: 'etagere-org' }, suspended_at: null },
        { id: 2, account: null, suspended_at: '2026-01-01T00:00:00Z' },
      ]),
    ).toEqual([
      { id: 1, account: 'etagere-org', suspended: false },
      { id: 2, account: null, suspended: true },
    ]);
    for (const bad of [{}, [{ id: '1' }], [{ id: -1 }], [null], 'x']) expect(parseInstallations(bad)).toBeNull();
  });

  it('reads a token and its expiry; refuses odd or expired ones', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseMintedToken({ token: 'ghs_x', expires_at: '2026-01-01T01:00:00Z' }, now)).toEqual({
      value: 'ghs_x',
      expiresAt: now + 3600_000,
    });
    for (const bad of [
      { token: 'ghs x', expires_at: '2026-01-01T01:00:00Z' },
      { token: '', expires_at: '2026-01-01T01:00:00Z' },
      { token: 'ghs_x', expires_at: 'soon' },
      { token: 'ghs_x', expires_at: '2025-12-31T23:00:00Z' },
      { token: 'ghs_x' },
      null,
    ]) {
      expect(parseMintedToken(bad, now)).toBeNull();
    }
  });
});

describe('nextPage', () => {
  const base = new URL('https://ghe.example.com/api/v3');
  it('follows rel="next" on the same base only', () => {
    expect(nextPage(undefined, base)).toEqual({ kind: 'none' });
    expect(nextPage('<https://ghe.example.com/api/v3/app/installations?per_page=100&page=1>; rel="prev"', base)).toEqual({ kind: 'none' });
    const next = nextPage(
      '<https://ghe.example.com/api/v3/app/installations?per_page=100&page=3>; rel="next", <https://ghe.example.com/api/v3/app/installations?page=9>; rel="last"',
      base,
    );
    expect(next.kind === 'next' && next.url.href).toBe('https://ghe.example.com/api/v3/app/installations?per_page=100&page=3');
    for (const foreign of [
      '<https://evil.example.com/api/v3/app/installations?page=2>; rel="next"',
      '<http://ghe.example.com/api/v3/app/installations?page=2>; rel="next"',
      '<https://ghe.example.com/app/installations?page=2>; rel="next"',
      '<https://ghe.example.com/api/v3/user?page=2>; rel="next"',
      '<not a url>; rel="next"',
    ]) {
      expect(nextPage(foreign, base).kind, foreign).toBe('foreign');
    }
  });
});
