import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config/load.js';
import { GITHUB_GET_ROUTES, GITHUB_MULTI_SEGMENT } from '../../src/http/github-routes.js';
import { DEFAULT_ROUTES, OTHER, ROUTE_MEMO_BYTES, createRouteMatcher } from '../../src/http/route.js';

/** Templates this test's upstream declares itself (`upstreams[].routes`), as the demo's cyclists do. */
const OWN_ROUTES = ['/bicyclists/:city'];

/** Each GitHub REST API description's GET paths (path -> indices into `descriptions`), written by `npm run routes:generate`. */
interface Digest {
  source: string;
  descriptions: string[];
  get: Record<string, number[]>;
}
const digest = JSON.parse(readFileSync(new URL('../fixtures/github-routes.digest.json', import.meta.url), 'utf8')) as Digest;
/** The one described path without its own template: `{base}...{head}`, Octokit's other spelling of `{basehead}`, is one segment. */
const PART_SEGMENT = '/repos/{owner}/{repo}/compare/{base}...{head}';

/** A concrete path of `template`: sample values in its parameters, two segments in a multi-segment one. */
const concrete = (template: string): string =>
  template.replace(/\{([^}]+)\}/g, (whole, name: string) => (GITHUB_MULTI_SEGMENT[template] === name ? `s-${name}/deep` : `s-${name}`));

describe('route templates for metric labels', () => {
  // As an upstream's matcher is built: its own templates, tried first, then GitHub's.
  const matcher = createRouteMatcher(OWN_ROUTES);
  const table: Array<[string, string]> = [
    ['/repos/octocat/hello-world', '/repos/{owner}/{repo}'],
    ['/repos/octocat/hello-world/', '/repos/{owner}/{repo}'],
    ['/repos/octocat/hello-world/releases/latest', '/repos/{owner}/{repo}/releases/latest'],
    ['/repos/octocat/hello-world/releases/12345', '/repos/{owner}/{repo}/releases/{release_id}'],
    ['/repos/o/r/issues', '/repos/{owner}/{repo}/issues'],
    ['/repos/o/r/issues/7/comments', '/repos/{owner}/{repo}/issues/{issue_number}/comments'],
    ['/repos/o/r/contents/src/deep/file.ts', '/repos/{owner}/{repo}/contents/{path}'],
    ['/repos/o/r/contents/README.md', '/repos/{owner}/{repo}/contents/{path}'],
    ['/repos/o/r/git/ref/heads/feature/x', '/repos/{owner}/{repo}/git/ref/{ref}'],
    ['/repos/o/r/compare/main...feature/x', '/repos/{owner}/{repo}/compare/{basehead}'],
    ['/repos/o/r/branches/feature/x', '/repos/{owner}/{repo}/branches/{branch}'],
    ['/repos/o/r/branches/feature/x/protection', '/repos/{owner}/{repo}/branches/{branch}/protection'],
    ['/repos/o/r/commits/main/status', '/repos/{owner}/{repo}/commits/{ref}/status'],
    ['/repos/o/r/commits/feature/x/check-runs', '/repos/{owner}/{repo}/commits/{ref}/check-runs'],
    ['/repos/o/r/commits/feature%2Fx', '/repos/{owner}/{repo}/commits/{ref}'],
    ['/users/octocat', '/users/{username}'],
    ['/users/octocat/repos', '/users/{username}/repos'],
    ['/user', '/user'],
    ['/user/repos', '/user/repos'],
    ['/orgs/etagere-org/repos', '/orgs/{org}/repos'],
    ['/search/issues', '/search/issues'],
    ['/rate_limit', '/rate_limit'],
    ['/enterprise/stats/all', '/enterprise/stats/all'],
    ['/enterprises/acme/settings/billing/usage', '/enterprises/{enterprise}/settings/billing/usage'],
    ['/enterprises/acme/copilot/billing/seats', '/enterprises/{enterprise}/copilot/billing/seats'],
    ['/organizations/etagere-org/org-properties/values', '/organizations/{org}/org-properties/values'],
    ['/graphql', '/graphql'],
    ['/', '/'],
    ['/bicyclists/helsinki', '/bicyclists/{city}'], // written /bicyclists/:city in the config: labelled in GitHub's spelling
    ['/no/such/thing/at/all', OTHER],
    ['/repos/only-owner', OTHER],
  ];
  it.each(table)('%s -> %s', (path, template) => {
    expect(matcher.match(path)).toBe(template);
  });

  it('labels at least 99 % of the GET paths of api.github.com, GHEC and the newest GHES with their own template', () => {
    expect(digest.descriptions).toEqual(['api.github.com', 'ghec', expect.stringMatching(/^ghes-\d+\.\d+$/)]);
    const fresh = createRouteMatcher([]);
    const described = Object.keys(digest.get);
    expect(described.length).toBeGreaterThan(800);
    const wrong = described.filter((template) => fresh.match(concrete(template)) !== template);
    expect(wrong).toEqual([PART_SEGMENT]);
    expect(fresh.match(concrete(PART_SEGMENT))).toBe('/repos/{owner}/{repo}/compare/{basehead}');
    digest.descriptions.forEach((name, index) => {
      const own = described.filter((path) => digest.get[path]!.includes(index));
      expect(own.length, name).toBeGreaterThan(500);
      expect(own.filter((path) => wrong.includes(path)).length / own.length, name).toBeLessThanOrEqual(0.01);
    });
  });

  it('ships every described GET path as a template, and no other', () => {
    const expected = Object.keys(digest.get).filter((path) => path !== PART_SEGMENT);
    expect([...GITHUB_GET_ROUTES]).toEqual(expected.sort());
    expect(Object.keys(GITHUB_MULTI_SEGMENT).every((template) => GITHUB_GET_ROUTES.includes(template))).toBe(true);
  });

  it('ships GitHub templates, sorted and without duplicates; the demo declares the fake cyclist service in its config', () => {
    expect(GITHUB_GET_ROUTES).toEqual([...new Set(GITHUB_GET_ROUTES)].sort());
    expect(DEFAULT_ROUTES).not.toContain('/bicyclists/{city}');
    expect(createRouteMatcher([]).match('/bicyclists/helsinki')).toBe(OTHER);
    const demo = loadConfig({ file: 'config/examples/demo.yaml', env: {} });
    expect(demo.upstreams.find((u) => u.name === 'cyclists')?.routes).toEqual(OWN_ROUTES);
  });

  it('prefers a literal segment over a parameter', () => {
    const own = createRouteMatcher(['/a/:x', '/a/b']);
    expect(own.match('/a/b')).toBe('/a/b');
    expect(own.match('/a/c')).toBe('/a/{x}');
  });

  it("tries the upstream's own templates before GitHub's", () => {
    const own = createRouteMatcher(['/repos/:owner/:repo/issues/*', '/things/:id']);
    expect(own.match('/repos/o/r/issues/7/comments')).toBe('/repos/{owner}/{repo}/issues/*');
    expect(own.match('/repos/o/r/pulls/7')).toBe('/repos/{owner}/{repo}/pulls/{pull_number}');
    expect(own.match('/things/1')).toBe('/things/{id}');
  });

  it('keeps the label set bounded whatever paths arrive', () => {
    const labels = new Set<string>();
    for (let i = 0; i < 5000; i++) labels.add(matcher.match(`/repos/u${i}/r${i}/weird/${i}`));
    expect(labels).toEqual(new Set([OTHER]));
  });

  it('hostile: long paths, many segments, encoded slashes, empty segments and unknown paths are `other` and bounded', () => {
    const hostile = createRouteMatcher([]);
    const many = '/x'.repeat(100_000);
    const cases: string[] = [
      `/repos/o/r${many}`,
      `/${'a'.repeat(1_000_000)}`,
      `/repos/o/r/issues${many}`,
      '/repos%2Fo%2Fr',
      '/repos/o%2Fr',
      '/repos//o/r',
      '//repos/o/r',
      '/repos/o/r//issues',
      '/repos/o/r/contents//a',
      '//',
      'repos/o/r',
      '',
      '/repos/o/r/issues/1/comments/2/x',
      '/admin/../repos/o/r',
      '/%00/%ff',
    ];
    for (const path of cases) expect(hostile.match(path), path.slice(0, 60)).toBe(OTHER);
    // A file's path spans any number of segments: still the one template.
    expect(hostile.match(`/repos/o/r/contents${many}`)).toBe('/repos/{owner}/{repo}/contents/{path}');
    expect(hostile.match(`/repos/o/r/branches${many}/protection`)).toBe('/repos/{owner}/{repo}/branches/{branch}/protection');
    for (let i = 0; i < 20_000; i++) hostile.match(`/repos/o/r/contents/${i}/${'y'.repeat(200)}`);
    expect(hostile.memoBytes).toBeLessThanOrEqual(ROUTE_MEMO_BYTES);
  });
});
