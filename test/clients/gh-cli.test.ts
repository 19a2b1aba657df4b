/**
 * The gh CLI (Debian's `gh`) through a zero-config proxy:
 * `gh api --paginate <full proxy URL>` follows the Link headers and returns every item exactly
 * once, and the fake's counters show that every request it saw carried a pool token.
 *
 * The zero-config invocation, with no credential anywhere:
 *
 *   GH_HOST=127.0.0.1:<port> GH_CONFIG_DIR=<empty dir> gh api --paginate \
 *     'http://127.0.0.1:<port>/users/octocat/repos?per_page=2' --jq '.[].id'
 *
 * - gh refuses to run `api` until it knows some host ("To get started with GitHub CLI, please run:
 *   gh auth login"). `GH_HOST` naming the proxy makes it a known host without a token; an empty
 *   GH_TOKEN does not do it.
 * - gh picks the token by the URL's host: for any host but github.com that is GH_ENTERPRISE_TOKEN,
 *   GITHUB_ENTERPRISE_TOKEN or the host's entry in hosts.yml. None is set (the environment is built
 *   from scratch, GH_CONFIG_DIR is an empty directory), so gh sends no Authorization: the proxy's
 *   pool does the authenticating.
 * - A full URL keeps its scheme (http) and port; `--hostname` is not needed.
 *
 * Skipped, saying why, where gh is not installed (.ci/run installs it).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  clientEnv,
  expectAllThroughProxy,
  listAll,
  probe,
  runClient,
  startZeroConfig,
  type Ran,
  type ZeroConfig,
  ghEnv,
} from '../helpers/clients.js';

const GH = ['/usr/bin/gh', 'gh'].find((candidate) => probe(candidate, ['--version']));
if (GH === undefined) process.stderr.write('gh CLI client test skipped: gh is not installed (apt-get install gh)\n');

describe.skipIf(GH === undefined)('gh api --paginate through a zero-config proxy', () => {
  let bench: ZeroConfig;
  let home: string;
  let userIds: number[];
  let orgIds: number[];

  /** `gh api --paginate URL --jq '.[].id'` with no credential: the ids, one per line. */
  const ghApi = (url: string, extra: readonly string[] = []): Promise<Ran> =>
    runClient(
      GH!,
      ['api', '--paginate', url, '--jq', '.[].id', ...extra],
      clientEnv(
        ghEnv(home, {
          GH_HOST: new URL(bench.proxy.url).host,
        }),
      ),
    );
  const ids = (ran: Ran): number[] =>
    ran.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map(Number);

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'etagere-gh-'));
    bench = await startZeroConfig('ghcli');
    userIds = (await listAll<{ id: number }>(bench.fake, '/users/octocat/repos')).map((repo) => repo.id);
    orgIds = (await listAll<{ id: number }>(bench.fake, '/orgs/etagere-org/repos')).map((repo) => repo.id);
    bench.fake.reset(); // the counters start from here
  });
  afterAll(async () => {
    await bench?.close();
    if (home !== undefined) rmSync(home, { recursive: true, force: true });
  });

  it('a user’s repositories, 2 a page: every item exactly once, every request on the proxy', async () => {
    const ran = await ghApi(`${bench.proxy.url}/users/octocat/repos?per_page=2`);
    expect(ran.code, `gh failed:\n${ran.stderr}`).toBe(0);
    expect(ids(ran)).toEqual(userIds);
    expect(userIds.length).toBeGreaterThan(2);
    expect(bench.fake.stats().byPath['/users/octocat/repos']).toBe(Math.ceil(userIds.length / 2));
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });

  it('an organization’s 75 repositories, 20 a page; a second run is answered from the cache', async () => {
    bench.fake.reset();
    const first = await ghApi(`${bench.proxy.url}/orgs/etagere-org/repos?per_page=20`);
    expect(first.code, `gh failed:\n${first.stderr}`).toBe(0);
    expect(ids(first)).toEqual(orgIds);
    expect(new Set(ids(first)).size).toBe(75);
    const pages = Math.ceil(orgIds.length / 20);
    expect(bench.fake.stats().byPath['/orgs/etagere-org/repos']).toBe(pages);
    const again = await ghApi(`${bench.proxy.url}/orgs/etagere-org/repos?per_page=20`);
    expect(ids(again)).toEqual(orgIds);
    expect(bench.fake.stats().byPath['/orgs/etagere-org/repos'], 'the second walk reached the fake').toBe(pages);
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });

  it('hostile: an unknown organization is gh’s clean 404, and nothing leaves the proxy', async () => {
    bench.fake.reset();
    const ran = await ghApi(`${bench.proxy.url}/orgs/no-such-org/repos?per_page=20`);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('Not Found (HTTP 404)');
    // gh prints the error body as it got it: GitHub's shape, from the fake through the proxy.
    expect(JSON.parse(ran.stdout)).toMatchObject({ message: 'Not Found', documentation_url: expect.any(String) });
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });
});
