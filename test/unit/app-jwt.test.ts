/**
 * The proxy's App JWT (src/platform/config/app-jwt.ts): checked with node:crypto and with the fake upstream's
 * verifier, which follows GitHub's rules; and the key reader, which never quotes a key.
 */
import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  AppKeyError,
  appJwt,
  appJwtClaims,
  appPrivateKey,
  JWT_AHEAD_SECONDS,
  JWT_BACKDATE_SECONDS,
} from '../../src/platform/config/app-jwt.js';
import { JWT_MESSAGES, verifyAppJwt } from '../../fake-github/index.js';
import { testAppKeys } from '../helpers/apps.js';

const keys = testAppKeys('unit/app-jwt');
const NOW = Date.parse('2026-03-01T12:00:00Z');
const decode = (part: string): Record<string, unknown> =>
  JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;

describe('appJwt', () => {
  const key = appPrivateKey(keys.privateKey);
  const app = { id: 123456, publicKey: createPublicKey(keys.publicKey) };

  it("has GitHub's claims: iat a minute back, exp nine minutes ahead (ten after iat), iss the App id", () => {
    const claims = appJwtClaims(123456, NOW + 999);
    expect(claims).toEqual({ iat: NOW / 1000 - 60, exp: NOW / 1000 + 540, iss: 123456 });
    expect(JWT_BACKDATE_SECONDS + JWT_AHEAD_SECONDS).toBe(600);
    const [header, payload] = appJwt(123456, key, NOW).split('.');
    expect(decode(header!)).toEqual({ alg: 'RS256', typ: 'JWT' });
    expect(decode(payload!)).toEqual(claims);
  });

  it('is an RS256 signature node:crypto verifies with the public key', () => {
    const [header, payload, signature] = appJwt(123456, key, NOW).split('.');
    expect(
      verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), createPublicKey(keys.publicKey), Buffer.from(signature!, 'base64url')),
    ).toBe(true);
    const other = testAppKeys('unit/app-jwt other');
    expect(
      verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), createPublicKey(other.publicKey), Buffer.from(signature!, 'base64url')),
    ).toBe(false);
  });

  it("is accepted by the fake's GitHub verifier for its whole life, and refused after", () => {
    const jwt = appJwt(123456, key, NOW);
    const find = (issuer: number | string) => (issuer === 123456 ? app : undefined);
    const at = (ms: number) => verifyAppJwt(jwt, find, Math.floor(ms / 1000));
    expect(at(NOW)).toEqual({ ok: true, app });
    // A verifier whose clock is a minute behind ours still takes it (iat is a minute back).
    expect(at(NOW - 60_000)).toEqual({ ok: true, app });
    expect(at(NOW + 8 * 60_000)).toEqual({ ok: true, app });
    expect(at(NOW + 9 * 60_000)).toEqual({ ok: false, status: 401, message: JWT_MESSAGES.expired });
    expect(verifyAppJwt(jwt, () => undefined, NOW / 1000)).toEqual({ ok: false, status: 404, message: JWT_MESSAGES.unknownApp });
  });
});

describe('appPrivateKey', () => {
  it('reads PKCS#1 (as GitHub hands it out) and PKCS#8', () => {
    expect(appPrivateKey(keys.privateKey).asymmetricKeyType).toBe('rsa');
    const pkcs8 = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' });
    expect(appPrivateKey(String(pkcs8)).asymmetricKeyType).toBe('rsa');
  });

  it.each([
    ['a public key', () => keys.publicKey, /no "BEGIN \.\.\. PRIVATE KEY" line/],
    ['plain text', () => 'hunter2-not-a-key', /no "BEGIN/],
    ['a truncated key', () => keys.privateKey.slice(0, 400) + '\n-----END RSA PRIVATE KEY-----\n', /not a readable PEM private key/],
    [
      'an EC key',
      () => String(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' })),
      /a ec key; a GitHub App key is RSA/,
    ],
    [
      'an encrypted key',
      () =>
        String(
          generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
            type: 'pkcs8',
            format: 'pem',
            cipher: 'aes-256-cbc',
            passphrase: 'p4ss-phrase',
          }),
        ),
      /not a readable PEM private key/,
    ],
  ])('refuses %s, without quoting it', (_name, make, message) => {
    const pem = make();
    let error: unknown;
    try {
      appPrivateKey(pem);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(AppKeyError);
    expect((error as Error).message).toMatch(message);
    for (const line of pem.split('\n').filter((l) => l.length > 20)) expect((error as Error).message).not.toContain(line);
  });
});
