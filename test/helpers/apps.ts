/**
 * GitHub App keys and JWTs for tests. Keys are generated at test time (never committed) and their
 * private PEM's lines are recorded as secrets, so the secrets scan after the suite fails when any
 * part of a key reaches a log, an answer or an error. JWTs are built by hand here, hostile ones
 * included (wrong algorithm, forged signature, bad times), independently of the proxy's signer.
 */
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { generateAppKeyPair } from '../../fake-github/index.js';
import { recordSecret } from './secrets.js';

export interface TestAppKeys {
  /** PKCS#1 PEM, as GitHub hands it out. */
  privateKey: string;
  publicKey: string;
  /** The private key's base64 lines (what a leak of the PEM would show, however it is escaped). */
  secretLines: string[];
}

/** A fresh RSA key pair whose private half is a recorded secret (`name` says which test made it). */
export function testAppKeys(name: string): TestAppKeys {
  const pair = generateAppKeyPair();
  const secretLines = pair.privateKey.split('\n').filter((line) => line.length >= 40 && !line.startsWith('-----'));
  secretLines.forEach((line, index) => recordSecret(`${name}: App private key line ${index + 1}`, line));
  return { ...pair, secretLines };
}

const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A JWT with the given header and claims, RS256-signed with `key` (or with `signature` as is). */
export function craftJwt(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  key: string | KeyObject,
  signature?: string,
): string {
  const unsigned = `${part(header)}.${part(claims)}`;
  const signed =
    signature ?? sign('RSA-SHA256', Buffer.from(unsigned), typeof key === 'string' ? createPrivateKey(key) : key).toString('base64url');
  return `${unsigned}.${signed}`;
}

/** The JWT GitHub documents: RS256, iat a minute back, exp nine minutes ahead, iss the App id. */
export function appJwtFor(appId: number | string, privateKey: string, nowMs = Date.now()): string {
  const now = Math.floor(nowMs / 1000);
  return craftJwt({ alg: 'RS256', typ: 'JWT' }, { iat: now - 60, exp: now + 540, iss: appId }, privateKey);
}

export const bearer = (jwt: string): Record<string, string> => ({ authorization: `Bearer ${jwt}` });
