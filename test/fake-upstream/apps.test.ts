/**
 * The fake's GitHub Apps, against GitHub's documented behaviour: JWT verification (RS256, iat/exp
 * window, iss), the App endpoints, installation tokens (expiry, revocation, their own quota, the
 * bot's view of repositories) and the control endpoints that steer them.
 */
import { generateKeyPairSync } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { parseAppSpec, AppSpecError, type FakeAppInput } from '../../fake-github/index.js';
import { appJwtFor, bearer, craftJwt, testAppKeys } from '../helpers/apps.js';
import { ALICE_REPO, auth, get, post, rate, until, useFake, type ErrorBody, type JsonObject, type RepoBody } from './helpers.js';

const APP_ID = 424242;
const OTHER_APP_ID = 515151;
const ORG_INSTALLATION = 7001;
const ALICE_INSTALLATION = 7002;
const THIRD_INSTALLATION = 7003;
const keys = testAppKeys('fake-upstream/apps main App');
const otherKeys = testAppKeys('fake-upstream/apps other App');

const apps: FakeAppInput[] = [
  {
    id: APP_ID,
    slug: 'ci-app',
    publicKey: keys.publicKey,
    installations: [
      { id: ORG_INSTALLATION, account: 'etagere-org', rateLimit: 12_500 },
      { id: ALICE_INSTALLATION, account: 'alice', repositories: ['alice/secret-project'], rateLimit: 3 },
      { id: THIRD_INSTALLATION, account: 'octocat' },
    ],
  },
  // The other App is given its private key: the fake keeps the public half only.
  { id: OTHER_APP_ID, publicKey: otherKeys.privateKey, installations: [{ id: 8001, account: 'bob' }] },
];

interface TokenBody {
  token: string;
  expires_at: string;
  permissions: Record<string, string>;
  repository_selection: string;
}

interface InstallationBody extends JsonObject {
  id: number;
  app_id: number;
  account: JsonObject;
  suspended_at: string | null;
  access_tokens_url: string;
}

describe('fake upstream: GitHub Apps', () => {
  const fake = useFake({ apps, tokenLimit: 1000 });
  const jwt = (): Record<string, string> => bearer(appJwtFor(APP_ID, keys.privateKey));
  const mint = (installation: number, headers = jwt()) =>
    fetch(`${fake.url}/app/installations/${installation}/access_tokens`, { method: 'POST', headers, body: '{}' }).then(async (res) => ({
      status: res.status,
      headers: res.headers,
      body: (await res.json()) as TokenBody & ErrorBody,
    }));
  const token = async (installation: number): Promise<string> => {
    const minted = await mint(installation);
    expect(minted.status).toBe(201);
    return minted.body.token;
  };

  beforeEach(async () => {
    expect((await post(`${fake.url}/__fake/reset`, { config: true })).status).toBe(200);
  });

  it('GET /app answers the App to its JWT, whether iss is the id, the id as a string or the client id', async () => {
    const app = await get(`${fake.url}/app`, jwt());
    expect(app.status).toBe(200);
    const body = app.json<JsonObject & { client_id: string; owner: JsonObject }>();
    expect(body).toMatchObject({ id: APP_ID, slug: 'ci-app', installations_count: 3, permissions: { metadata: 'read', contents: 'read' } });
    expect(body.client_id).toMatch(/^Iv23li[0-9a-f]{14}$/);
    expect(body.owner.login).toBe('etagere-org');
    expect(app.headers.get('etag')).toMatch(/^W\/"/);
    expect(app.headers.get('x-ratelimit-limit')).toBe('1000');
    for (const issuer of [String(APP_ID), body.client_id]) {
      expect((await get(`${fake.url}/app`, bearer(appJwtFor(issuer, keys.privateKey)))).status).toBe(200);
    }
  });

  it("GET /app/installations lists the App's installations with GitHub's Link pagination", async () => {
    const first = await get(`${fake.url}/app/installations?per_page=2`, jwt());
    expect(first.status).toBe(200);
    const page = first.json<InstallationBody[]>();
    expect(page.map((i) => i.id)).toEqual([ORG_INSTALLATION, ALICE_INSTALLATION]);
    expect(page[0]).toMatchObject({ app_id: APP_ID, app_slug: 'ci-app', repository_selection: 'all', target_type: 'Organization' });
    expect(page[1]).toMatchObject({ repository_selection: 'selected', target_type: 'User' });
    expect(page[0]!.account.login).toBe('etagere-org');
    expect(page[0]!.access_tokens_url).toBe(`${fake.url}/app/installations/${ORG_INSTALLATION}/access_tokens`);
    expect(first.headers.get('link')).toBe(
      `<${fake.url}/app/installations?per_page=2&page=2>; rel="next", <${fake.url}/app/installations?per_page=2&page=2>; rel="last"`,
    );
    const second = await get(`${fake.url}/app/installations?per_page=2&page=2`, jwt());
    expect(second.json<InstallationBody[]>().map((i) => i.id)).toEqual([THIRD_INSTALLATION]);
    // Another App sees only its own; one of them is 404 to this App.
    const other = await get(`${fake.url}/app/installations`, bearer(appJwtFor(OTHER_APP_ID, otherKeys.privateKey)));
    expect(other.json<InstallationBody[]>().map((i) => i.id)).toEqual([8001]);
    expect((await get(`${fake.url}/app/installations/8001`, jwt())).status).toBe(404);
    expect((await get(`${fake.url}/app/installations/${ORG_INSTALLATION}`, jwt())).json<InstallationBody>().id).toBe(ORG_INSTALLATION);
    expect((await get(`${fake.url}/repos/alice/secret-project/installation`, jwt())).json<InstallationBody>().id).toBe(ALICE_INSTALLATION);
    expect((await get(`${fake.url}/repos/bob/bikes/installation`, jwt())).status).toBe(404);
  });

  it('POST /app/installations/:id/access_tokens mints a ghs_ token that lives an hour, acting as the App bot', async () => {
    const before = Date.now();
    const minted = await mint(ORG_INSTALLATION);
    expect(minted.status).toBe(201);
    expect(minted.body.token).toMatch(/^ghs_[A-Za-z0-9]{36}$/);
    expect(minted.body).toMatchObject({ permissions: { metadata: 'read', contents: 'read' }, repository_selection: 'all' });
    const expires = Date.parse(minted.body.expires_at);
    expect(minted.body.expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(expires).toBeGreaterThan(before + 3599_000 - 1000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 3600_000);
    // Each mint is a new token.
    expect(await token(ORG_INSTALLATION)).not.toBe(minted.body.token);

    const repos = await get(`${fake.url}/installation/repositories?per_page=100`, auth(minted.body.token));
    expect(repos.status).toBe(200);
    const list = repos.json<{ total_count: number; repository_selection: string; repositories: RepoBody[] }>();
    expect(list.repository_selection).toBe('all');
    expect(list.total_count).toBe(77);
    expect(list.repositories.map((r) => r.full_name)).toContain('etagere-org/internal-tools');
    expect(repos.headers.get('x-oauth-scopes')).toBeNull();
    // The private repositories of its account are visible, other accounts' are not (404, as to anybody).
    expect((await get(`${fake.url}/repos/etagere-org/roadmap`, auth(minted.body.token))).status).toBe(200);
    expect((await get(`${fake.url}/repos/alice/secret-project`, auth(minted.body.token))).status).toBe(404);
    expect((await get(`${fake.url}/repos/octocat/hello-world`, auth(minted.body.token))).status).toBe(200);
  });

  it('a selected-repositories installation sees exactly its selection; a token of one installation reaches nothing of another', async () => {
    const alice = await token(ALICE_INSTALLATION);
    const repos = await get(`${fake.url}/installation/repositories`, auth(alice));
    expect(repos.json<{ repositories: RepoBody[] }>().repositories.map((r) => r.full_name)).toEqual(['alice/secret-project']);
    expect((await get(`${fake.url}/repos/alice/secret-project`, auth(alice))).status).toBe(200);
    expect((await get(`${fake.url}/repos/etagere-org/roadmap`, auth(alice))).status).toBe(404);
    // An installation token is no App credential.
    expect((await get(`${fake.url}/app`, auth(await token(THIRD_INSTALLATION)))).status).toBe(401);
  });

  it('an installation token is not a user: GET /user and /user/repos are 403 "Resource not accessible by integration"', async () => {
    const bot = await token(ORG_INSTALLATION);
    for (const path of ['/user', '/user/repos']) {
      const answer = await get(`${fake.url}${path}`, auth(bot));
      expect(answer.status).toBe(403);
      expect(answer.json<ErrorBody>().message).toBe('Resource not accessible by integration');
    }
    // And GET /installation/repositories is for installation tokens only.
    const withPat = await get(`${fake.url}/installation/repositories`, auth(ALICE_REPO));
    expect(withPat.status).toBe(403);
    expect(withPat.json<ErrorBody>().message).toMatch(/^You must authenticate with an installation access token/);
    expect((await get(`${fake.url}/installation/repositories`, jwt())).status).toBe(403);
    expect((await get(`${fake.url}/installation/repositories`)).status).toBe(401);
  });

  it('each installation has its own budget, shared by all of its tokens, at its configured size', async () => {
    const first = await token(ORG_INSTALLATION);
    const again = await token(ORG_INSTALLATION);
    const one = await get(`${fake.url}/users/octocat`, auth(first));
    expect(rate(one.headers)).toMatchObject({ limit: 12_500, used: 1 });
    const two = await get(`${fake.url}/users/octocat`, auth(again));
    expect(rate(two.headers)).toMatchObject({ limit: 12_500, used: 2 });
    const limits = await get(`${fake.url}/rate_limit`, auth(again));
    expect(limits.json<{ resources: { core: { limit: number; used: number } } }>().resources.core).toMatchObject({
      limit: 12_500,
      used: 2,
    });
    // The octocat installation has no rate limit of its own: the fake's token limit.
    expect(rate((await get(`${fake.url}/users/octocat`, auth(await token(THIRD_INSTALLATION)))).headers).limit).toBe(1000);

    // Alice's installation has 3 an hour: the 4th request is refused, re-minting does not help.
    const alice = await token(ALICE_INSTALLATION);
    for (let i = 0; i < 3; i++) expect((await get(`${fake.url}/users/alice`, auth(alice))).status).toBe(200);
    const refused = await get(`${fake.url}/users/alice`, auth(await token(ALICE_INSTALLATION)));
    expect(refused.status).toBe(403);
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(refused.json<ErrorBody>().message).toBe(`API rate limit exceeded for installation ID ${ALICE_INSTALLATION}.`);
  });

  it('counts the requests of installation tokens by installation id (the bot login is the same for all of them)', async () => {
    const [org, alice] = [await token(ORG_INSTALLATION), await token(ALICE_INSTALLATION)];
    await get(`${fake.url}/users/octocat`, auth(org));
    await get(`${fake.url}/users/octocat`, auth(await token(ORG_INSTALLATION))); // a re-minted token: the same installation
    await get(`${fake.url}/users/alice`, auth(alice));
    await get(`${fake.url}/users/alice`, auth('demo_token_alice_repo'));
    const stats = fake.stats();
    expect(stats.byInstallation).toEqual({ [ORG_INSTALLATION]: 2, [ALICE_INSTALLATION]: 1 });
    expect(stats.byCredential).toMatchObject({ 'ci-app[bot]': 3, alice: 1 });
    expect(JSON.stringify(stats)).not.toMatch(/ghs_/);
    expect((await post(`${fake.url}/__fake/reset`, {})).status).toBe(200);
    expect(fake.stats().byInstallation).toEqual({});
  });

  it("the ETag follows the Authorization header: a re-minted token's first revalidation is a full 200", async () => {
    const oldToken = await token(ORG_INSTALLATION);
    const newToken = await token(ORG_INSTALLATION);
    const first = await get(`${fake.url}/repos/etagere-org/repo-001`, auth(oldToken));
    const etag = first.headers.get('etag')!;
    expect((await get(`${fake.url}/repos/etagere-org/repo-001`, { ...auth(oldToken), 'if-none-match': etag })).status).toBe(304);
    const other = await get(`${fake.url}/repos/etagere-org/repo-001`, { ...auth(newToken), 'if-none-match': etag });
    expect(other.status).toBe(200);
    expect(other.headers.get('etag')).not.toBe(etag);
    expect(other.text).toBe(first.text);
  });

  it('an expired installation token is 401 Bad credentials; a fresh one works', async () => {
    expect((await post(`${fake.url}/__fake/config`, { installationTokenSeconds: 1 })).status).toBe(200);
    const short = await mint(ORG_INSTALLATION);
    expect(Date.parse(short.body.expires_at) - Date.now()).toBeLessThanOrEqual(1000);
    const expired = await until(async () => {
      const answer = await get(`${fake.url}/users/octocat`, auth(short.body.token));
      return answer.status === 401 ? answer : undefined;
    }, 5000);
    expect(expired.json<ErrorBody>().message).toBe('Bad credentials');
    expect((await get(`${fake.url}/rate_limit`, auth(short.body.token))).status).toBe(401);
    expect((await get(`${fake.url}/users/octocat`, auth(await token(ORG_INSTALLATION)))).status).toBe(200);
  });

  it('a suspended installation: its tokens stop, minting is 403, it stays listed; unsuspended, it mints again', async () => {
    const live = await token(ORG_INSTALLATION);
    const suspended = await post(`${fake.url}/__fake/installations/${ORG_INSTALLATION}`, { suspended: true });
    expect(suspended.json<{ installation: JsonObject }>().installation).toMatchObject({ id: ORG_INSTALLATION, suspended: true });
    expect((await get(`${fake.url}/users/octocat`, auth(live))).status).toBe(401);
    const refused = await mint(ORG_INSTALLATION);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe('This installation has been suspended');
    const listed = (await get(`${fake.url}/app/installations`, jwt())).json<InstallationBody[]>();
    expect(listed.find((i) => i.id === ORG_INSTALLATION)?.suspended_at).toMatch(/Z$/);
    // The other installations carry on.
    expect((await get(`${fake.url}/users/octocat`, auth(await token(THIRD_INSTALLATION)))).status).toBe(200);
    await post(`${fake.url}/__fake/installations/${ORG_INSTALLATION}`, { suspended: false });
    expect((await get(`${fake.url}/users/octocat`, auth(live))).status).toBe(401);
    expect((await mint(ORG_INSTALLATION)).status).toBe(201);
  });

  it('a deleted installation: its tokens stop, minting is 404 Not Found, it is no longer listed', async () => {
    const live = await token(ORG_INSTALLATION);
    const deleted = await fetch(`${fake.url}/__fake/installations/${ORG_INSTALLATION}`, { method: 'DELETE' });
    expect(deleted.status).toBe(200);
    expect((await get(`${fake.url}/users/octocat`, auth(live))).json<ErrorBody>().message).toBe('Bad credentials');
    const refused = await mint(ORG_INSTALLATION);
    expect(refused.status).toBe(404);
    expect(refused.body.message).toBe('Not Found');
    expect((await get(`${fake.url}/app/installations`, jwt())).json<InstallationBody[]>().map((i) => i.id)).toEqual([
      ALICE_INSTALLATION,
      THIRD_INSTALLATION,
    ]);
    expect((await fetch(`${fake.url}/__fake/installations/${ORG_INSTALLATION}`, { method: 'DELETE' })).status).toBe(404);
  });

  describe("hostile JWTs get GitHub's refusals", () => {
    const now = (): number => Math.floor(Date.now() / 1000);
    const header = { alg: 'RS256', typ: 'JWT' };
    const cases: Array<[string, () => string, number, string]> = [
      ['a forged signature (another key)', () => appJwtFor(APP_ID, otherKeys.privateKey), 401, 'A JSON web token could not be decoded'],
      [
        'alg none',
        () => craftJwt({ alg: 'none', typ: 'JWT' }, { iat: now() - 60, exp: now() + 540, iss: APP_ID }, '', ''),
        401,
        'A JSON web token could not be decoded',
      ],
      [
        'HS256 with the public key as the secret',
        () => craftJwt({ alg: 'HS256', typ: 'JWT' }, { iat: now() - 60, exp: now() + 540, iss: APP_ID }, '', 'c2lnbmF0dXJl'),
        401,
        'A JSON web token could not be decoded',
      ],
      [
        'a tampered payload',
        () => {
          const [head, , signature] = appJwtFor(APP_ID, keys.privateKey).split('.');
          const payload = Buffer.from(JSON.stringify({ iat: now() - 60, exp: now() + 540, iss: OTHER_APP_ID })).toString('base64url');
          return `${head}.${payload}.${signature}`;
        },
        401,
        'A JSON web token could not be decoded',
      ],
      [
        'no iss',
        () => craftJwt(header, { iat: now() - 60, exp: now() + 540 }, keys.privateKey),
        401,
        'A JSON web token could not be decoded',
      ],
      ['an iss that names no App', () => appJwtFor(999_999, keys.privateKey), 404, 'Integration not found'],
      ['the iss of another App', () => appJwtFor(OTHER_APP_ID, keys.privateKey), 401, 'A JSON web token could not be decoded'],
      [
        'an expired one',
        () => craftJwt(header, { iat: now() - 700, exp: now() - 100, iss: APP_ID }, keys.privateKey),
        401,
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
      ],
      [
        'no exp',
        () => craftJwt(header, { iat: now() - 60, iss: APP_ID }, keys.privateKey),
        401,
        "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
      ],
      [
        'exp 601 s after iat',
        () => craftJwt(header, { iat: now() - 60, exp: now() + 541, iss: APP_ID }, keys.privateKey),
        401,
        "'Expiration time' claim ('exp') is too far in the future",
      ],
      [
        'exp an hour away',
        () => craftJwt(header, { iat: now(), exp: now() + 3600, iss: APP_ID }, keys.privateKey),
        401,
        "'Expiration time' claim ('exp') is too far in the future",
      ],
      [
        'iat two minutes ahead',
        () => craftJwt(header, { iat: now() + 120, exp: now() + 500, iss: APP_ID }, keys.privateKey),
        401,
        "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
      ],
      [
        'iat as a string',
        () => craftJwt(header, { iat: String(now()), exp: now() + 500, iss: APP_ID }, keys.privateKey),
        401,
        "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued",
      ],
      ['garbage in JWT form', () => 'eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln', 401, 'A JSON web token could not be decoded'],
    ];
    it.each(cases)('%s', async (_name, make, status, message) => {
      for (const path of ['/app', `/app/installations/${ORG_INSTALLATION}/access_tokens`]) {
        const answer = await fetch(`${fake.url}${path}`, { method: path === '/app' ? 'GET' : 'POST', headers: bearer(make()) });
        expect(answer.status, path).toBe(status);
        const body = (await answer.json()) as ErrorBody;
        expect(body).toEqual({ message, documentation_url: 'https://docs.github.com/rest' });
      }
    });

    it('iat up to 60 s ahead is clock drift GitHub forgives', async () => {
      const drifted = craftJwt(header, { iat: now() + 50, exp: now() + 590, iss: APP_ID }, keys.privateKey);
      expect((await get(`${fake.url}/app`, bearer(drifted))).status).toBe(200);
    });

    it('a JWT is Bearer only, is no token elsewhere, and other credentials get 401 on App endpoints', async () => {
      const valid = appJwtFor(APP_ID, keys.privateKey);
      expect((await get(`${fake.url}/app`, { authorization: `token ${valid}` })).json<ErrorBody>().message).toBe('Bad credentials');
      const elsewhere = await get(`${fake.url}/repos/octocat/hello-world`, bearer(valid));
      expect(elsewhere.status).toBe(403);
      expect(elsewhere.json<ErrorBody>().message).toBe('Resource not accessible by integration');
      for (const credential of [auth(ALICE_REPO), {}]) {
        const answer = await get(`${fake.url}/app/installations`, credential);
        expect(answer.status).toBe(401);
        expect(answer.json<ErrorBody>().message).toBe('A JSON web token could not be decoded');
      }
      expect((await mint(ORG_INSTALLATION, auth(await token(THIRD_INSTALLATION)))).status).toBe(401);
      // Methods the App endpoints do not have are 404, whoever asks.
      expect((await get(`${fake.url}/app`, auth(ALICE_REPO), 'DELETE')).status).toBe(404);
      expect((await get(`${fake.url}/app/installations/${ORG_INSTALLATION}/access_tokens`, jwt())).status).toBe(404);
      // One App cannot mint for another App's installation.
      expect((await mint(8001)).status).toBe(404);
      expect((await mint(123)).status).toBe(404);
    });
  });

  describe('control endpoints', () => {
    it('adds an App and installations at run time, and reset forgets them', async () => {
      const runtimeKeys = testAppKeys('fake-upstream/apps runtime App');
      const added = await post(`${fake.url}/__fake/apps`, { id: 616161, slug: 'late-app', publicKey: runtimeKeys.publicKey });
      expect(added.status).toBe(200);
      expect(added.json<{ app: JsonObject }>().app).toMatchObject({ id: 616161, slug: 'late-app', installations: [] });
      const installed = await post(`${fake.url}/__fake/installations`, { app: 616161, id: 9001, account: 'carol', rateLimit: 5000 });
      expect(installed.json<{ installation: JsonObject }>().installation).toMatchObject({ id: 9001, account: 'carol', rateLimit: 5000 });
      const lateJwt = bearer(appJwtFor(616161, runtimeKeys.privateKey));
      expect((await get(`${fake.url}/app/installations`, lateJwt)).json<InstallationBody[]>().map((i) => i.id)).toEqual([9001]);
      const listing = await get(`${fake.url}/__fake/apps`);
      expect(listing.json<{ apps: Array<{ id: number }> }>().apps.map((a) => a.id)).toEqual([APP_ID, OTHER_APP_ID, 616161]);
      expect(listing.text).not.toContain('BEGIN');
      await post(`${fake.url}/__fake/reset`, {});
      expect((await get(`${fake.url}/app`, lateJwt)).status).toBe(404);
    });

    it('refuses bad definitions with 400/404/422 and never echoes a key', async () => {
      const ecKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const cases: Array<[string, unknown, number]> = [
        ['/__fake/apps', { id: APP_ID, publicKey: keys.publicKey }, 422],
        ['/__fake/apps', { id: 1, publicKey: 'not a key' }, 400],
        ['/__fake/apps', { id: 1, publicKey: ecKey }, 400],
        ['/__fake/apps', { id: 1, publicKey: keys.publicKey, owner: 'nobody-here' }, 400],
        ['/__fake/apps', { id: -4, publicKey: keys.publicKey }, 400],
        ['/__fake/apps', { id: 2, publicKey: keys.publicKey, installations: [{ id: ORG_INSTALLATION }] }, 422],
        ['/__fake/apps', { id: 3, publicKey: keys.publicKey, extra: true }, 400],
        ['/__fake/installations', { app: 12345, id: 9100 }, 404],
        ['/__fake/installations', { app: APP_ID, id: 9100, account: 'nobody-here' }, 400],
        ['/__fake/installations', { app: APP_ID, id: 9100, repositories: ['bob/bikes'] }, 400],
        ['/__fake/installations', { app: APP_ID, id: 9100, rateLimit: 20_000 }, 400],
        ['/__fake/installations', { app: APP_ID, id: ALICE_INSTALLATION }, 422],
        ['/__fake/installations/424', { suspended: true }, 404],
        [`/__fake/installations/${ORG_INSTALLATION}`, { suspended: 'yes' }, 400],
      ];
      for (const [path, body, status] of cases) {
        const answer = await post(`${fake.url}${path}`, body);
        expect(answer.status, `${path} ${JSON.stringify(body).slice(0, 60)}`).toBe(status);
        expect(typeof answer.json<ErrorBody>().message).toBe('string');
        expect(answer.text).not.toContain('BEGIN');
      }
      // Nothing half-added: App 2 (whose installation clashed) does not exist.
      expect((await get(`${fake.url}/__fake/apps`)).json<{ apps: Array<{ id: number }> }>().apps.map((a) => a.id)).toEqual([
        APP_ID,
        OTHER_APP_ID,
      ]);
    });
  });
});

describe('parseAppSpec (--app)', () => {
  const readKey = (path: string): string => {
    if (path === 'keys/app.pem') return 'PEM';
    throw Object.assign(new Error('nope'), { code: 'ENOENT' });
  };

  it('reads ID[/SLUG]:KEY_FILE:INSTALLATIONS', () => {
    expect(parseAppSpec('123456/ci-app:keys/app.pem:1001@etagere-org+1002@alice=12500+1003', readKey)).toEqual({
      id: 123456,
      slug: 'ci-app',
      publicKey: 'PEM',
      installations: [{ id: 1001, account: 'etagere-org' }, { id: 1002, account: 'alice', rateLimit: 12500 }, { id: 1003 }],
    });
    expect(parseAppSpec('7:keys/app.pem:', readKey)).toEqual({ id: 7, publicKey: 'PEM', installations: [] });
  });

  it.each([
    ['no colons', '123456'],
    ['one colon', '123456:keys/app.pem'],
    ['a bad id', 'abc:keys/app.pem:1'],
    ['a bad slug', '12/Big_Slug:keys/app.pem:1'],
    ['an unreadable key file', '12:keys/missing.pem:1'],
    ['a bad installation', '12:keys/app.pem:1@'],
    ['a bad rate limit', '12:keys/app.pem:1=lots'],
  ])('refuses %s with a message that names the part', (_name, spec) => {
    expect(() => parseAppSpec(spec, readKey)).toThrow(AppSpecError);
  });
});
