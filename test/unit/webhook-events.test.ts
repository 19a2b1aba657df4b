/**
 * The event table (src/cache/rules/webhook-events.ts), its expansion from payloads (scopes.ts), the paths it
 * covers (stale-marks.ts), and docs/webhooks.md's copy of the table.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COVERED, createCoverage, policyByPath, inScope } from '../../src/cache/rules/stale-marks.js';
import { EVENT_TABLE } from '../../src/cache/rules/webhook-events.js';
import { scopesFor } from '../../src/cache/rules/webhook-scopes.js';
import type { FreshnessPolicy } from '../../src/cache/rules/policy.js';

const repository = { id: 1296269, name: 'Hello-World', full_name: 'Octocat/Hello-World', owner: { login: 'Octocat' } };
const orgRepo = { id: 2001, name: 'repo-001', full_name: 'etagere-org/repo-001', owner: { login: 'etagere-org' } };

/** The scopes as "path" or "path/**" strings. */
const shown = (event: string, payload: unknown): string[] | undefined =>
  scopesFor(event, payload)?.map((scope) => (scope.prefix ? `${scope.path}/**` : scope.path));

describe('webhook events -> path scopes', () => {
  it('push marks the repository (by name and by id), its code and refs, and the owner lists', () => {
    const scopes = shown('push', { ref: 'refs/heads/main', repository, sender: { login: 'octocat' } })!;
    expect(scopes).toEqual(
      expect.arrayContaining([
        '/repos/octocat/hello-world',
        '/repositories/1296269',
        '/repos/octocat/hello-world/commits/**',
        '/repositories/1296269/contents/**',
        '/repos/octocat/hello-world/git/**',
        '/repos/octocat/hello-world/branches/**',
        '/orgs/octocat/repos',
        '/users/octocat/repos',
        '/user/repos',
      ]),
    );
    expect(scopes).not.toContain('/repos/octocat/hello-world/**'); // issues are not code
    expect(scopes).not.toContain('/repos/octocat/hello-world/issues/**');
  });

  it('an issue event marks that issue (and below), the issue list and the repository, not every issue', () => {
    const scopes = shown('issues', { action: 'edited', issue: { number: 42 }, repository })!;
    expect(scopes).toEqual(
      expect.arrayContaining([
        '/repos/octocat/hello-world',
        '/repos/octocat/hello-world/issues',
        '/repos/octocat/hello-world/issues/42/**',
      ]),
    );
    expect(scopes).not.toContain('/repos/octocat/hello-world/issues/**');
    // Without a number: the issues prefix instead (wider, never narrower).
    expect(shown('issues', { action: 'edited', repository })).toContain('/repos/octocat/hello-world/issues/**');
  });

  it('a rename marks the old name too; a transfer, the former owner; an organization rename, its former login', () => {
    const renamed = shown('repository', { action: 'renamed', changes: { repository: { name: { from: 'Old-Name' } } }, repository })!;
    expect(renamed).toEqual(
      expect.arrayContaining(['/repos/octocat/hello-world/**', '/repos/octocat/old-name/**', '/repositories/1296269/**']),
    );
    const moved = shown('repository', { action: 'transferred', changes: { owner: { from: { user: { login: 'alice' } } } }, repository })!;
    expect(moved).toEqual(expect.arrayContaining(['/repos/alice/hello-world/**', '/users/alice/repos', '/orgs/octocat/repos']));
    const org = shown('organization', { action: 'renamed', changes: { login: { from: 'old-org' } }, organization: { login: 'new-org' } })!;
    expect(org).toEqual(expect.arrayContaining(['/orgs/new-org/**', '/orgs/old-org/**', '/repos/old-org/**']));
  });

  it('installation events mark the App lists and each listed repository', () => {
    const scopes = shown('installation_repositories', {
      action: 'added',
      installation: { id: 7, account: { login: 'etagere-org' } },
      repositories_added: [{ id: 2001, full_name: 'etagere-org/repo-001' }],
      repositories_removed: [{ id: 2002, full_name: 'etagere-org/repo-002' }],
    })!;
    expect(scopes).toEqual(
      expect.arrayContaining([
        '/app/installations/7',
        '/installation/repositories/**',
        '/repos/etagere-org/repo-001/installation',
        '/repositories/2002/installation',
      ]),
    );
  });

  it('star marks the counts: the repository, its stargazers, the lists, and the stargazer', () => {
    expect(shown('star', { action: 'created', repository: orgRepo, sender: { login: 'alice' } })).toEqual(
      expect.arrayContaining([
        '/repos/etagere-org/repo-001',
        '/repos/etagere-org/repo-001/stargazers/**',
        '/orgs/etagere-org/repos',
        '/users/alice/starred/**',
      ]),
    );
  });

  it('an unknown event is undefined; a known event without what it needs marks only what it can name', () => {
    expect(scopesFor('sponsorship', { repository })).toBeUndefined();
    expect(scopesFor('__proto__', {})).toBeUndefined();
    expect(scopesFor('constructor', {})).toBeUndefined();
    expect(scopesFor('ping', { zen: 'Design for failure.', hook_id: 1 })).toEqual([]);
    expect(shown('push', {})).toEqual(['/user/repos']);
    expect(shown('push', null)).toEqual(['/user/repos']);
  });

  it('hostile payload values never make a path of their own: they count as absent', () => {
    const hostile = [
      { full_name: '../../admin', id: 1 },
      { full_name: 'a/b/c', id: 1 },
      { full_name: 'octocat/..', id: -5 },
      { name: 'x\ny', owner: { login: 'octocat' }, id: 1.5 },
      { name: 'ok', owner: { login: '-bad' }, id: '12; DROP' },
      { full_name: 'owner/%2e%2e', id: Number.MAX_VALUE },
    ];
    for (const repo of hostile) {
      const scopes = scopesFor('push', { repository: repo, issue: { number: '../1' } })!;
      for (const scope of scopes) {
        expect(scope.path).toMatch(/^(\/[a-z0-9._-]+)+$/);
        expect(scope.path.split('/')).not.toContain('..');
        expect(scope.path).not.toContain('%');
      }
    }
    // A thousand-repository installation is bounded (1,000 listed repositories at most).
    const many = Array.from({ length: 5000 }, (_, index) => ({ id: index + 1, full_name: `org/r${index}` }));
    expect(scopesFor('installation', { action: 'created', installation: { id: 1 }, repositories: many })!.length).toBeLessThan(2100);
  });
});

describe('webhook coverage: where cache.webhook_fresh_seconds applies', () => {
  it('covers the owners named, and paths without an owner only with "*"', () => {
    const org = createCoverage(['Etagere-Org']);
    expect(org('/repos/etagere-org/repo-001')).toBe(true);
    expect(org('/repos/ETAGERE-ORG/repo-001/issues/5/comments')).toBe(true);
    expect(org('/orgs/etagere-org/repos')).toBe(true);
    expect(org('/repos/alice/dotfiles')).toBe(false);
    expect(org('/repositories/2001')).toBe(false); // no owner in the path
    expect(org('/user/repos')).toBe(false);
    const every = createCoverage(['*']);
    expect(every('/repositories/2001/issues')).toBe(true);
    expect(every('/user/repos')).toBe(true);
    expect(createCoverage([])('/repos/etagere-org/repo-001')).toBe(false);
  });

  it('leaves out what GitHub sends no event for', () => {
    const every = createCoverage(['*']);
    for (const path of [
      '/users/octocat',
      '/orgs/etagere-org',
      '/search/repositories',
      '/repos/o/r/traffic/views',
      '/repos/o/r/subscribers',
      '/rate_limit',
      '/zen',
    ])
      expect(every(path), path).toBe(false);
  });

  it('every covered pattern is marked by some event of the table', () => {
    const payload = {
      repository: orgRepo,
      organization: { login: 'etagere-org' },
      issue: { number: 5 },
      sender: { login: 'alice' },
      installation: { id: 9, account: { login: 'etagere-org' } },
    };
    const scopes = Object.keys(EVENT_TABLE).flatMap((event) => scopesFor(event, payload) ?? []);
    const sample = (template: string): string[] => {
      const concrete = template.replace('/**', '/x/y').replace('{owner}', 'etagere-org');
      return concrete.startsWith('{repo}')
        ? [concrete.replace('{repo}', '/repos/etagere-org/repo-001'), concrete.replace('{repo}', '/repositories/2001')]
        : [concrete];
    };
    for (const template of COVERED)
      for (const path of sample(template))
        expect(
          scopes.some((scope) => inScope(scope, path.replace('/issues/x', '/issues/5'))),
          path,
        ).toBe(true);
  });

  it('a covered path gets at least webhook_fresh_seconds of freshness; others keep the policy', () => {
    const policy: FreshnessPolicy = {
      kind: 'max-age',
      ttl: 0,
      maxAgeCap: undefined,
      staleIfError: 0,
      staleWhileRevalidate: 0,
      heuristicFraction: 0,
    };
    const cache = { webhook_fresh_seconds: 600 } as Parameters<typeof policyByPath>[0]['cache'];
    const byPath = policyByPath({ prefix: '/gh', strip_prefix: true, cache }, policy, ['etagere-org']);
    expect(byPath('/gh/repos/etagere-org/repo-001').freshFloor).toBe(600);
    expect(byPath('/gh/users/alice').freshFloor).toBeUndefined();
    const off = policyByPath({ prefix: '/', strip_prefix: false, cache: { ...cache, webhook_fresh_seconds: 0 } }, policy, ['*']);
    expect(off('/repos/etagere-org/repo-001')).toBe(policy);
  });
});

describe('docs/webhooks.md', () => {
  const doc = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
  /** Rows of the event table: | `event` | what | scopes | */
  const rows = new Map(
    [...doc.matchAll(/^\| `([a-z_]+)` \| ([^|]*) \| ([^|]*) \|$/gm)].map((match) => [match[1]!, match[3]!.trim()] as const),
  );

  it('shows the event table as the code has it: every event, with its scopes', () => {
    expect([...rows.keys()].sort()).toEqual(Object.keys(EVENT_TABLE).sort());
    for (const [event, rule] of Object.entries(EVENT_TABLE)) {
      const cell = rows.get(event)!;
      for (const template of rule.scopes) expect(cell, `${event}: ${template}`).toContain(`\`${template}\``);
    }
  });
});
