/**
 * PyGithub (Debian's python3-github) through a zero-config proxy: a
 * script (pygithub_walk.py, beside this file) with `Github(base_url=<proxy>)` and no token walks a
 * user's repositories, an organization's repositories, and `repo.owner.name`. PyGithub follows the
 * Link headers of list pages and the URLs in response bodies, and asserts that each is on
 * base_url's host and port: the walk completes only when Link and body URLs point at the proxy
 * (rewrite_body_urls). The fake's counters show that every request it saw carried a pool token.
 *
 * The interpreter is the first of /usr/bin/python3 and `python3` on PATH that can `import github`
 * (Debian installs the package for its own python3 only); without one the test is skipped, saying
 * why (.ci/run installs python3-github).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientEnv, expectAllThroughProxy, listAll, probe, runClient, startZeroConfig, type ZeroConfig } from '../helpers/clients.js';

const SCRIPT = fileURLToPath(new URL('./pygithub_walk.py', import.meta.url));
/** No user site-packages, no bytecode files beside the script. */
const PYTHON_ENV = clientEnv({ PYTHONNOUSERSITE: '1', PYTHONDONTWRITEBYTECODE: '1' });
const PYTHON = ['/usr/bin/python3', 'python3'].find((candidate) => probe(candidate, ['-c', 'import github'], PYTHON_ENV));
if (PYTHON === undefined)
  process.stderr.write(
    'PyGithub client test skipped: no python3 here can `import github` (apt-get install python3-github; tried /usr/bin/python3, python3)\n',
  );

interface RepoSummary {
  id: number;
  full_name: string;
  owner: string;
}
interface Walk {
  user: { login: string; name: string };
  org: { login: string; name: string };
  user_repos: RepoSummary[];
  org_repos: RepoSummary[];
  owners: { user: { login: string; name: string }; org: { login: string; name: string } };
}
interface Listed {
  id: number;
  full_name: string;
  owner: { login: string };
}

describe.skipIf(PYTHON === undefined)('PyGithub through a zero-config proxy', () => {
  let bench: ZeroConfig;
  let userRepos: Listed[];
  let orgRepos: Listed[];
  let names: { octocat: string; org: string };

  beforeAll(async () => {
    bench = await startZeroConfig('pygithub');
    userRepos = await listAll<Listed>(bench.fake, '/users/octocat/repos');
    orgRepos = await listAll<Listed>(bench.fake, '/orgs/etagere-org/repos');
    const record = async (path: string): Promise<string> =>
      ((await (await fetch(`${bench.fake.url}${path}`)).json()) as { name: string }).name;
    names = { octocat: await record('/users/octocat'), org: await record('/orgs/etagere-org') };
    bench.fake.reset(); // the counters start from here: the reads above were the test's, not the client's
  });
  afterAll(async () => {
    await bench?.close();
  });

  it('walks a user’s repositories, an organization’s and repo.owner, every request on the proxy', async () => {
    const ran = await runClient(PYTHON!, [SCRIPT, bench.proxy.url, 'octocat', 'etagere-org', '2'], PYTHON_ENV);
    expect(ran.code, `pygithub_walk.py failed:\n${ran.stderr}`).toBe(0);
    const walk = JSON.parse(ran.stdout) as Walk;

    expect(walk.user).toEqual({ login: 'octocat', name: names.octocat });
    expect(walk.org).toEqual({ login: 'etagere-org', name: names.org });
    // Every repository exactly once, in the fake's order, with its owner.
    const summary = (repo: Listed): RepoSummary => ({ id: repo.id, full_name: repo.full_name, owner: repo.owner.login });
    expect(walk.user_repos).toEqual(userRepos.map(summary));
    expect(walk.org_repos).toEqual(orgRepos.map(summary));
    expect(userRepos.length).toBeGreaterThan(2); // per_page 2: more than one page
    expect(orgRepos.length).toBeGreaterThan(2);
    // repo.owner.name: the owner completed through its body URL, on the proxy.
    expect(walk.owners).toEqual({
      user: { login: 'octocat', name: names.octocat },
      org: { login: 'etagere-org', name: names.org },
    });

    const { byPath } = bench.fake.stats();
    expect(byPath['/users/octocat/repos'], 'Link pages of the user’s repositories').toBe(Math.ceil(userRepos.length / 2));
    expect(byPath['/orgs/etagere-org/repos'], 'Link pages of the organization’s repositories').toBe(Math.ceil(orgRepos.length / 2));
    expect(byPath['/users/etagere-org'], 'the organization as a repository’s owner, by its body URL').toBe(1);
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });

  it('hostile: an unknown user is a clean GithubException 404 through the proxy, and no request leaves it', async () => {
    bench.fake.reset();
    const ran = await runClient(PYTHON!, [SCRIPT, bench.proxy.url, 'no-such-user-here', 'etagere-org', '2'], PYTHON_ENV);
    expect(ran.code).not.toBe(0);
    expect(ran.stderr).toMatch(/UnknownObjectException: 404/);
    expect(ran.stderr).toContain('"message": "Not Found"');
    expectAllThroughProxy(bench.fake, bench.poolLogins);
  });
});
