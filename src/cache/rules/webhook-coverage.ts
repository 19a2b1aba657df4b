/**
 * Pure: the paths webhooks keep current, where `cache.webhook_fresh_seconds` applies. A path is
 * covered when every change GitHub makes to what it serves comes with an event that marks it
 * (webhook-events.ts): the repository, its code and refs, issues, pull requests, labels, milestones,
 * releases, stargazers, comments, statuses and checks, deployments, Actions runs; the owner's
 * repository lists, members and teams. test/unit/webhook-events.test.ts checks that each
 * pattern here is marked by some event of the table.
 *
 * Deliveries come only for the accounts whose webhooks point at the proxy (`webhooks.owners`):
 * `/repos/<owner>/...`, `/orgs/<owner>/...` and `/users/<owner>/repos` are covered for those
 * owners. Paths that name no owner (`/repositories/<id>/...`, `/user/repos`) are covered only
 * with `"*"` (every account).
 *
 * Not covered, because GitHub sends no event for the change: user profiles and followers,
 * traffic, computed statistics, an organization's own profile, search. Covered paths still miss
 * what no event announces (reactions, subscribers_count, permissions gained through a team):
 * docs/webhooks.md lists it with the trade-off.
 */
import { normalPath, segmentsOf } from './stale-marks.js';
import { policyOf, type FreshnessPolicy, type UpstreamPolicy } from './policy.js';
import type { UpstreamConfig } from '../../platform/config/schema.js';
import { parseTemplate } from './webhook-events.js';
import { apiPathOf } from './webhook-paths.js';

const REPO_PARTS = [
  '',
  '/branches/**',
  '/commits/**',
  '/contents/**',
  '/git/**',
  '/compare/**',
  '/readme/**',
  '/tags/**',
  '/issues/**',
  '/pulls/**',
  '/labels/**',
  '/milestones/**',
  '/releases/**',
  '/stargazers',
  '/comments/**',
  '/statuses/**',
  '/check-runs/**',
  '/check-suites/**',
  '/deployments/**',
  '/actions/runs/**',
  '/actions/jobs/**',
];

/** Covered paths, as templates of webhook-events.ts ({repo}: by name and by id; {owner}: one of webhooks.owners). */
export const COVERED: readonly string[] = [
  ...REPO_PARTS.map((part) => `{repo}${part}`),
  '/orgs/{owner}/repos',
  '/users/{owner}/repos',
  '/orgs/{owner}/members/**',
  '/orgs/{owner}/teams/**',
  '/user/repos',
];

const OWNER = Symbol('owner');
const ANY = Symbol('any');
type Segment = string | typeof OWNER | typeof ANY;

interface Pattern {
  readonly segments: readonly Segment[];
  readonly prefix: boolean;
}

function compile(template: string): Pattern[] {
  const { path, prefix } = parseTemplate(template);
  const forms = path.startsWith('{repo}') ? [`/repos/{owner}/{name}${path.slice(6)}`, `/repositories/{id}${path.slice(6)}`] : [path];
  return forms.map((form) => ({
    segments: segmentsOf(form).map((part): Segment => (part === '{owner}' ? OWNER : /^\{\w+\}$/.test(part) ? ANY : part)),
    prefix,
  }));
}

const PATTERNS: readonly Pattern[] = COVERED.flatMap(compile);

/** Whether webhooks keep `apiPath` current, given the accounts they come from (`"*"`: every one). */
export function createCoverage(owners: readonly string[]): (apiPath: string) => boolean {
  const every = owners.includes('*');
  const known = new Set(owners.map((owner) => owner.toLowerCase()));
  const matches = (pattern: Pattern, segments: readonly string[]): boolean => {
    if (segments.length < pattern.segments.length || (!pattern.prefix && segments.length !== pattern.segments.length)) return false;
    let owned = false;
    for (let index = 0; index < pattern.segments.length; index++) {
      const want = pattern.segments[index]!;
      const got = segments[index]!;
      if (want === OWNER) {
        if (!every && !known.has(got)) return false;
        owned = true;
      } else if (want !== ANY && want !== got) return false;
    }
    return owned || every;
  };
  return (apiPath) => {
    if (!every && known.size === 0) return false;
    const segments = segmentsOf(normalPath(apiPath));
    return PATTERNS.some((pattern) => matches(pattern, segments));
  };
}

/**
 * An upstream's freshness policy by path: on the paths webhooks cover, at least
 * `cache.webhook_fresh_seconds` of freshness (policy.ts `freshFloor`); elsewhere the policy as configured.
 */
export function policyByPath(
  cfg: Pick<UpstreamConfig, 'prefix' | 'strip_prefix' | 'cache'>,
  policy: FreshnessPolicy,
  owners: readonly string[],
): (pathname: string) => FreshnessPolicy {
  const seconds = cfg.cache.webhook_fresh_seconds;
  if (seconds === 0) return () => policy;
  const covered = createCoverage(owners);
  const extended: FreshnessPolicy = { ...policy, freshFloor: seconds };
  return (pathname) => (covered(apiPathOf(cfg, pathname)) ? extended : policy);
}

/** An upstream's freshness policy (policy.ts `UpstreamPolicy`): as configured, with the webhooks' floor on the paths they cover. */
export function upstreamPolicy(cfg: Pick<UpstreamConfig, 'prefix' | 'strip_prefix' | 'cache'>, owners: readonly string[]): UpstreamPolicy {
  const policy = policyOf(cfg.cache);
  return { kind: policy.kind, at: policyByPath(cfg, policy, owners) };
}
