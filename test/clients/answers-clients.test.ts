/**
 * Real clients against the cache of issue 37. Each sends its own Accept for the same read (curl
 * `*` + `/*`, Octokit `application/vnd.github.v3+json`, PyGithub `*` + `/*`, gh an empty one), and
 * GitHub answers them all with one JSON: through the proxy they share one entry, one upstream
 * request. Octokit's `graphql` runs a query twice and `gh api graphql` once more: one upstream call.
 * Every client goes without a credential: the pool's tokens do the authenticating. Each client is
 * skipped, saying why, where it is not installed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { graphql } from '@octokit/graphql';
import { Octokit } from '@octokit/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../fake-github/index.js';
import { parseTokenSpec } from '../../fake-github/tokens.js';
import { clientEnv, ghEnv, probe, runClient } from '../helpers/clients.js';
import { startTestProxy, type TestProxy } from '../helpers/proxy.js';

const CURL = ['/usr/bin/curl', 'curl'].find((candidate) => probe(candidate, ['--version']));
const GH = ['/usr/bin/gh', 'gh'].find((candidate) => probe(candidate, ['--version']));
const PYTHON = probe('/usr/bin/python3', ['-c', 'import github']) ? '/usr/bin/python3' : undefined;
for (const [name, found] of [
  ['curl', CURL],
  ['gh', GH],
  ['PyGithub (/usr/bin/python3 -c "import github")', PYTHON],
] as const)
  if (found === undefined) process.stderr.write(`answers client test: ${name} not installed, its part skipped\n`);

const TOKENS = ['answers_clients_pool_one', 'answers_clients_pool_two'];
const quiet = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };
const PYGITHUB = `
import json, sys
from github import Github
user = Github(base_url=sys.argv[1], retry=None, timeout=15).get_user(sys.argv[2])
print(json.dumps({"login": user.login, "id": user.id}))
`;

describe('real clients, each with its own Accept, share one entry; GraphQL clients get hits', () => {
  let fake: FakeUpstream;
  let proxy: TestProxy;
  let home: string;

  beforeAll(async () => {
    fake = await startFakeUpstream({
      tokens: parseTokenSpec(TOKENS.map((token, index) => `${token}@${['bob', 'carol'][index]}:public_repo`).join(',')),
    });
    proxy = await startTestProxy({
      upstreams: [{ name: 'github', prefix: '/', url: fake.url, token_pool: true, graphql: true }],
      pool: { tokens: TOKENS.map((value, index) => ({ name: `t${index}`, value })) },
    });
    home = mkdtempSync(join(tmpdir(), 'etagere-answers-clients-'));
  });
  afterAll(async () => {
    await proxy?.close();
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
  });

  const gh = (args: string[]) => runClient(GH!, args, clientEnv(ghEnv(home, { GH_HOST: new URL(proxy.url).host })));

  it('curl, Octokit, PyGithub and gh read /users/octocat: one upstream request, one JSON', async () => {
    const path = '/users/octocat';
    const logins: string[] = [];
    const octokit = new Octokit({ baseUrl: proxy.url, log: quiet });
    logins.push(((await octokit.request('GET /users/{username}', { username: 'octocat' })).data as { login: string }).login);
    if (CURL !== undefined) {
      const ran = await runClient(CURL, ['-q', '-s', '--fail', `${proxy.url}${path}`], clientEnv());
      logins.push((JSON.parse(ran.stdout) as { login: string }).login);
    }
    if (PYTHON !== undefined) {
      const ran = await runClient(PYTHON, ['-c', PYGITHUB, proxy.url, 'octocat'], clientEnv());
      expect(ran.stderr).toBe('');
      logins.push((JSON.parse(ran.stdout) as { login: string }).login);
    }
    if (GH !== undefined) {
      const ran = await gh(['api', `${proxy.url}${path}`, '--jq', '.login']);
      expect(ran.code, ran.stderr).toBe(0);
      logins.push(ran.stdout.trim());
    }
    expect(new Set(logins)).toEqual(new Set(['octocat']));
    expect(fake.stats().byPath[path]).toBe(1);
  });

  it("Octokit's graphql and gh api graphql: the repeated query is answered from the cache, whoever asks", async () => {
    const query = '{ repository(owner: "octocat", name: "hello-world") { nameWithOwner stargazerCount } }';
    const ask = graphql.defaults({ baseUrl: proxy.url });
    const first = await ask<{ repository: { nameWithOwner: string } }>(query);
    const again = await ask<{ repository: { nameWithOwner: string } }>(query);
    expect([first.repository.nameWithOwner, again]).toEqual(['octocat/hello-world', first]);
    expect(fake.stats().byPath['/graphql']).toBe(1);
    if (GH !== undefined) {
      const ran = await gh(['api', `${proxy.url}/graphql`, '-f', `query=${query}`, '-i']);
      expect(ran.code, ran.stderr).toBe(0);
      // gh sends an empty Accept, Octokit application/vnd.github.v3+json: equivalent, one answer.
      expect(ran.stdout).toMatch(/Cache-Status: etagere; hit/i);
      expect(fake.stats().byPath['/graphql']).toBe(1);
    }
  });
});
