/**
 * The fake's issues and new repositories (POST /__fake/issues, POST /__fake/repos) with the
 * webhooks GitHub sends for them, a repository's issues in GraphQL, and the equivalent Accept
 * values GitHub answers with one JSON.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { ALICE_PUBLIC, auth, get, OCTOCAT_REPO, post, until, type JsonObject, type RepoBody } from './helpers.js';

const SECRET = 'fake-issues-webhook-secret-0123';

describe('fake upstream: issues, new repositories, equivalent Accept values', () => {
  let fake: FakeUpstream;
  let server: Server;
  const got: Array<{ event: string; payload: JsonObject }> = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        got.push({
          event: String(req.headers['x-github-event']),
          payload: JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonObject,
        });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    fake = await startFakeUpstream({ webhookUrl: `http://127.0.0.1:${port}/hook`, webhookSecret: SECRET });
  });
  afterAll(async () => {
    await fake?.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  beforeEach(() => {
    fake.reset();
    got.length = 0;
  });

  const graphql = async (query: string): Promise<JsonObject> => {
    const res = await fetch(`${fake.url}/graphql`, { method: 'POST', headers: auth(OCTOCAT_REPO), body: JSON.stringify({ query }) });
    return (await res.json()) as JsonObject;
  };

  it('opens an issue: the repository changes (count, ETag), GraphQL lists it, an issues delivery carries its node_id', async () => {
    const before = await get(`${fake.url}/repos/etagere-org/repo-003`, auth(ALICE_PUBLIC));
    const opened = await post(`${fake.url}/__fake/issues`, { path: '/repos/etagere-org/repo-003', title: 'It broke' });
    expect(opened.status).toBe(201);
    const { number, node_id } = opened.json<{ number: number; node_id: string }>();
    expect(number).toBe(1);
    const after = await get(`${fake.url}/repos/etagere-org/repo-003`, auth(ALICE_PUBLIC));
    const openIssues = (body: RepoBody): number => body.open_issues_count as number;
    expect(openIssues(after.json<RepoBody>())).toBe(openIssues(before.json<RepoBody>()) + 1);
    expect(after.headers.get('etag')).not.toBe(before.headers.get('etag'));
    const answer = await graphql(
      '{ repository(owner: "etagere-org", name: "repo-003") { issues(first: 5, states: OPEN) { totalCount nodes { id number title state } } } }',
    );
    expect(answer).toEqual({
      data: { repository: { issues: { totalCount: 1, nodes: [{ id: node_id, number: 1, title: 'It broke', state: 'OPEN' }] } } },
    });
    await until(async () => (got.length === 1 ? true : undefined));
    expect(got[0]).toMatchObject({
      event: 'issues',
      payload: {
        action: 'opened',
        issue: { node_id, number: 1, title: 'It broke' },
        repository: { full_name: 'etagere-org/repo-003', node_id: expect.any(String) },
      },
    });
  });

  it('creates a repository: it exists at once, and a repository created delivery names it', async () => {
    expect((await get(`${fake.url}/repos/carol/fresh`, auth(ALICE_PUBLIC))).status).toBe(404);
    const created = await post(`${fake.url}/__fake/repos`, { owner: 'carol', name: 'fresh' });
    expect([created.status, created.json<JsonObject>().full_name]).toEqual([201, 'carol/fresh']);
    expect((await get(`${fake.url}/repos/carol/fresh`, auth(ALICE_PUBLIC))).status).toBe(200);
    await until(async () => (got.length === 1 ? true : undefined));
    expect(got[0]).toMatchObject({ event: 'repository', payload: { action: 'created', repository: { full_name: 'carol/fresh' } } });
    // Bad input: 400, 404, 422; nothing created.
    for (const [body, status] of [
      [{ owner: 'carol', name: 'fresh' }, 422],
      [{ owner: 'nobody-here', name: 'x' }, 404],
      [{ owner: 'carol', name: '../x' }, 400],
      [{ owner: 'carol', name: 'y', private: 'yes' }, 400],
      [{ owner: 'carol', name: 'y', extra: 1 }, 400],
    ] as const)
      expect([body, (await post(`${fake.url}/__fake/repos`, body)).status]).toEqual([body, status]);
    for (const [body, status] of [
      [{ path: '/repos/carol/none', title: 'x' }, 404],
      [{ path: '/repos/carol/fresh', title: '' }, 400],
      [{ path: '/repos/carol/fresh', title: 'x', author: 'nobody-here' }, 404],
    ] as const)
      expect([body, (await post(`${fake.url}/__fake/issues`, body)).status]).toEqual([body, status]);
  });

  it('answers no Accept, */*, application/json, vnd.github+json and vnd.github.v3+json with the same JSON, as GitHub does', async () => {
    const bodies = new Set<string>();
    const types = new Set<string | null>();
    for (const accept of [undefined, '*/*', 'application/json', 'application/vnd.github+json', 'application/vnd.github.v3+json']) {
      const answer = await get(`${fake.url}/repos/octocat/hello-world/readme`, accept === undefined ? {} : { accept });
      bodies.add(answer.text);
      types.add(answer.headers.get('content-type'));
      expect(answer.headers.get('x-github-media-type')).toBe('github.v3; format=json');
    }
    expect([bodies.size, [...types]]).toEqual([1, ['application/json; charset=utf-8']]);
    const raw = await get(`${fake.url}/repos/octocat/hello-world/readme`, { accept: 'application/vnd.github.raw' });
    expect(bodies.has(raw.text)).toBe(false);
  });
});
