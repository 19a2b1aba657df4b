/**
 * Which credentials may go upstream as a client's own when consumer keys are on: GitHub-shaped
 * ones only (src/pool/rules/github-credential.ts), and what the gate makes of the rest
 * (src/pool/consumers/gate.ts): a mistyped consumer key is refused, never sent to GitHub.
 */
import { describe, expect, it } from 'vitest';
import { identify, verdict } from '../../src/pool/consumers/gate.js';
import { createConsumers } from '../../src/pool/consumers/consumers.js';
import { githubAppJwt, githubCredential, githubShapedToken } from '../../src/pool/rules/github-credential.js';

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
const jwt = (header: unknown, payload: unknown): string => `${b64(header)}.${b64(payload)}.c2lnbmF0dXJlLXNpZ25hdHVyZQ`;
const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

const CLASSIC = `ghp_${'A1b2C3d4E5'.repeat(3)}abcdef`; // 36 after the prefix
const STATELESS = `ghs_12345_${jwt({ alg: 'RS256', typ: 'JWT' }, { iss: 12345, exp: 1 })}`.replace(/=/g, '');
const FINE_GRAINED = `github_pat_11ABCDEFG0123456789abc_${'x'.repeat(59)}`;
const HEX = 'a94a8fe5ccb19ba61c4c0873d391e987982fbbd3';
const APP_JWT = jwt({ alg: 'RS256', typ: 'JWT' }, { iat: 1, exp: 2, iss: 123456 });
const CLIENT_ID_JWT = jwt({ alg: 'RS256' }, { iss: 'Iv23liABCDEF12345678' });

describe('GitHub-shaped tokens', () => {
  it.each([
    ['a classic personal token', CLASSIC],
    ['an OAuth token', CLASSIC.replace('ghp_', 'gho_')],
    ['a user-to-server token', CLASSIC.replace('ghp_', 'ghu_')],
    ['an installation token', CLASSIC.replace('ghp_', 'ghs_')],
    ['a long stateless installation token (dots, "_" and "-")', STATELESS],
    ['a refresh token', CLASSIC.replace('ghp_', 'ghr_')],
    ['a fine-grained personal token', FINE_GRAINED],
    ['a 40-hex classic token', HEX],
    ['a 40-hex token in capitals', HEX.toUpperCase()],
  ])('%s is GitHub-shaped', (_what, token) => {
    expect(githubShapedToken(token)).toBe(true);
  });

  it.each([
    ['a consumer key', 'consumer_key_web_5f2a9c'],
    ['a near miss of the prefix', CLASSIC.replace('ghp_', 'ghx_')],
    ['a prefix with too little after it', 'ghp_short'],
    ['41 hex digits', `${HEX}a`],
    ['39 hex digits', HEX.slice(1)],
    ['a token with a space', `ghp_${'a'.repeat(20)} ${'b'.repeat(20)}`],
    ['an empty value', ''],
    ['a fake demo token', 'demo_token_alice_repo'],
  ])('hostile: %s is not', (_what, token) => {
    expect(githubShapedToken(token)).toBe(false);
  });
});

describe('Authorization values GitHub could take', () => {
  it('a GitHub App JWT is told from an OIDC token by its issuer', () => {
    expect(githubAppJwt(APP_JWT)).toBe(true);
    expect(githubAppJwt(jwt({ alg: 'RS256' }, { iss: 'https://issuer.example' }))).toBe(false);
  });

  it.each([
    `token ${CLASSIC}`,
    `Bearer ${FINE_GRAINED}`,
    `TOKEN ${HEX}`,
    `bearer   ${STATELESS}  `,
    basic('x-access-token', CLASSIC.replace('ghp_', 'ghs_')),
    basic('octocat', CLASSIC),
    basic(CLASSIC, ''),
    basic(CLASSIC, 'x-oauth-basic'),
    basic('Ov23liAbCdEf12345678', HEX), // an OAuth App's client id and secret
    `Bearer ${APP_JWT}`, // a GitHub App as itself
    `Bearer ${CLIENT_ID_JWT}`,
  ])('%s goes upstream', (authorization) => {
    expect(githubCredential(authorization)).toBe(true);
  });

  it.each([
    ['a consumer key as token', 'token consumer_key_web_5f2a9c'],
    ['a near key as Bearer', 'Bearer consumer_key_web_5f2a9'],
    ['Basic with a password', basic('octocat', 'hunter2')],
    ['Basic with a token user and a password', basic(CLASSIC, 'hunter2')],
    ['a token without a scheme', CLASSIC],
    ['another scheme', `Digest ${CLASSIC}`],
    ['two credentials', `token ${CLASSIC} ${CLASSIC}`],
    ['a JWT as token', `token ${APP_JWT}`],
    ['an OIDC token (a URL issuer)', `Bearer ${jwt({ alg: 'RS256' }, { iss: 'https://token.actions.githubusercontent.com' })}`],
    ['an HMAC-signed JWT', `Bearer ${jwt({ alg: 'HS256' }, { iss: 123 })}`],
    ['an unsigned JWT', `Bearer ${jwt({ alg: 'none' }, { iss: 123 })}`],
    ['a JWT that is not JSON', 'Bearer aGVsbG8.d29ybGQ.c2ln'],
    ['garbage Basic', 'Basic %%%'],
  ])('hostile: %s does not', (_what, authorization) => {
    expect(githubCredential(authorization)).toBe(false);
  });
});

describe('the consumer gate with consumer keys on', () => {
  const KEY = 'consumer_key_web_5f2a9c';
  const consumers = createConsumers([{ name: 'web', value: KEY }]);
  const judge = (headers: Record<string, string>, githubLike = true) => {
    const identified = identify(headers, consumers, undefined);
    if (identified instanceof Promise) throw new Error('no OIDC here');
    return verdict(identified, 'GET', '/repos/o/r', githubLike);
  };

  it('lets a key, a GitHub credential and no credential at all through to the next steps', () => {
    expect(judge({ 'x-etagere-key': KEY }).refusal).toBeUndefined();
    expect(judge({ authorization: `token ${KEY}` }).refusal).toBeUndefined();
    expect(judge({ authorization: `token ${CLASSIC}` }).refusal).toBeUndefined();
    expect(judge({ 'x-etagere-key': KEY, authorization: `token ${CLASSIC}` }).refusal).toBeUndefined();
    expect(judge({}).refusal).toBeUndefined();
    expect(judge({ 'x-etagere-key': '  ' }).refusal).toBeUndefined(); // blank: no key
  });

  it('hostile: a mistyped key in Authorization is refused 401, counted as a key refusal', () => {
    for (const authorization of [`token ${KEY}x`, `Bearer ${KEY.slice(1)}`, basic('octocat', `${KEY}X`), `token ${KEY.toUpperCase()}`]) {
      const refusal = judge({ authorization }).refusal;
      expect(refusal?.reply.status, authorization).toBe(401);
      expect(refusal?.reply.message).toMatch(/^Bad credentials: .*not sent upstream/);
      expect(refusal?.reply.message).not.toContain(KEY);
      expect(refusal).toMatchObject({ consumer: '-', reason: 'key' });
    }
  });

  it('hostile: an unknown X-Etagere-Key gets a 401 that says the key is not known', () => {
    for (const headers of [
      { 'x-etagere-key': 'nope' } as Record<string, string>,
      { 'x-etagere-key': `${KEY}x`, authorization: `token ${CLASSIC}` },
    ]) {
      const refusal = judge(headers).refusal;
      expect(refusal?.reply.status).toBe(401);
      expect(refusal?.reply.message).toBe('Unknown consumer key: the X-Etagere-Key sent is not a key of this proxy');
    }
  });

  it('hostile: a right key next to a foreign Authorization is refused too (that Authorization would go upstream)', () => {
    expect(judge({ 'x-etagere-key': KEY, authorization: `token ${KEY}x` }).refusal?.reply.status).toBe(401);
  });

  it('on an upstream without token_pool, a client credential of another shape goes as it is', () => {
    expect(judge({ authorization: 'Bearer an-internal-api-token' }, false).refusal).toBeUndefined();
    expect(judge({ 'x-etagere-key': 'nope' }, false).refusal?.reply.status).toBe(401);
  });
});
