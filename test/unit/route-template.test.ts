import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config/load.js';
import { DEFAULT_ROUTES, OTHER, createRouteMatcher } from '../../src/http/route-template.js';

/** Templates this test's upstream declares itself (`upstreams[].routes`), as the demo's cyclists do. */
const OWN_ROUTES = ['/bicyclists/:city'];

describe('route templates for metric labels', () => {
  // As an upstream's matcher is built: its own templates first, then the built-in GitHub ones.
  const matcher = createRouteMatcher([...OWN_ROUTES, ...DEFAULT_ROUTES]);
  const table: Array<[string, string]> = [
    ['/repos/octocat/hello-world', '/repos/:owner/:repo'],
    ['/repos/octocat/hello-world/', '/repos/:owner/:repo'],
    ['/repos/octocat/hello-world/releases/latest', '/repos/:owner/:repo/releases/latest'],
    ['/repos/octocat/hello-world/releases/12345', '/repos/:owner/:repo/releases/:id'],
    ['/repos/o/r/contents/src/deep/file.ts', '/repos/:owner/:repo/contents/*'],
    ['/users/octocat', '/users/:username'],
    ['/users/octocat/repos', '/users/:username/repos'],
    ['/user', '/user'],
    ['/user/repos', '/user/repos'],
    ['/orgs/etagere-org/repos', '/orgs/:org/repos'],
    ['/rate_limit', '/rate_limit'],
    ['/', '/'],
    ['/bicyclists/helsinki', '/bicyclists/:city'],
    ['/no/such/thing/at/all', OTHER],
    ['/repos/only-owner', OTHER],
  ];
  it.each(table)('%s -> %s', (path, template) => {
    expect(matcher.match(path)).toBe(template);
  });
  it('ships only GitHub templates; the demo declares the fake cyclist service in its config', () => {
    expect(DEFAULT_ROUTES).not.toContain('/bicyclists/:city');
    expect(createRouteMatcher(DEFAULT_ROUTES).match('/bicyclists/helsinki')).toBe(OTHER);
    const demo = loadConfig({ file: 'config/examples/demo.yaml', env: {} });
    expect(demo.upstreams.find((u) => u.name === 'cyclists')?.routes).toEqual(OWN_ROUTES);
  });
  it('prefers a literal segment over a parameter', () => {
    const own = createRouteMatcher(['/a/:x', '/a/b']);
    expect(own.match('/a/b')).toBe('/a/b');
    expect(own.match('/a/c')).toBe('/a/:x');
  });
  it('keeps the label set bounded whatever paths arrive', () => {
    const labels = new Set<string>();
    for (let i = 0; i < 5000; i++) labels.add(matcher.match(`/repos/u${i}/r${i}/weird/${i}`));
    expect(labels).toEqual(new Set([OTHER]));
  });
});
