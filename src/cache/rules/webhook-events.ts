/**
 * Pure: which cached paths a GitHub webhook event makes stale. One table, EVENT_TABLE, from the
 * event name (X-GitHub-Event) to path-scope templates filled from the payload; docs/webhooks.md
 * shows it (test/unit/webhook-events.test.ts keeps the two equal). An event the table does not
 * name is unknown: acknowledged, nothing marked.
 *
 * Templates are API paths (below the API root, as stale-marks.ts normalises them):
 *
 *   {repo}          the repository, twice: /repos/<owner>/<name> and /repositories/<id> (by id)
 *   {owner}         the repository's owner, else the organization, else the installation's account
 *   {org}           organization.login          {number}   issue.number or pull_request.number
 *   {team}          team.slug                   {sender}   sender.login
 *   {member}        member.login or membership.user.login
 *   {installation}  installation.id
 *   a final "/**"   the path and everything below it (a prefix scope); otherwise that exact path
 *
 * A template whose {repo}, {owner}, {org}, {sender}, {member} or {team} the payload lacks is left
 * out; one that lacks a {number} or {installation} falls back to the prefix before it. Names are
 * checked (GitHub's login, repository and slug characters, numeric ids): a payload value that is
 * anything else counts as absent, so a payload never names a path of its own making.
 *
 * `others` applies templates to the other repositories and accounts a payload names: a renamed
 * repository's former name, a transferred repository's former owner, a renamed organization's
 * former login, a fork, an issue's new repository, and the repositories an installation lists.
 */

export interface ScopeTemplate {
  readonly path: string;
  readonly prefix: boolean;
}

export interface EventRule {
  /** What changes, for docs/webhooks.md. */
  readonly about: string;
  readonly scopes: readonly string[];
  /** Templates for every other repository or account the payload names (see above). */
  readonly others?: readonly string[];
}

const OWNER_LISTS = ['/orgs/{owner}/repos', '/users/{owner}/repos', '/user/repos'];
const OWNER_OBJECTS = ['/orgs/{owner}', '/users/{owner}'];
const CODE = [
  '{repo}',
  '{repo}/branches/**',
  '{repo}/commits/**',
  '{repo}/contents/**',
  '{repo}/git/**',
  '{repo}/compare/**',
  '{repo}/readme/**',
  '{repo}/tags/**',
  '{repo}/languages',
  '{repo}/contributors',
  '{repo}/stats/**',
  '{repo}/activity',
];
const REFS = ['{repo}', '{repo}/branches/**', '{repo}/tags/**', '{repo}/git/**', '{repo}/compare/**'];
const WHOLE_REPO = ['{repo}/**', ...OWNER_LISTS, ...OWNER_OBJECTS];
const STARS = ['{repo}', '{repo}/stargazers/**', ...OWNER_LISTS, '/users/{sender}/starred/**', '/user/starred/**'];
const TEAMS = ['{repo}', '/orgs/{org}/teams/**', '{repo}/teams/**', '{repo}/collaborators/**', '/user/teams', '/user/repos'];
const CHECKS = ['{repo}/commits/**', '{repo}/check-runs/**', '{repo}/check-suites/**'];

export const EVENT_TABLE: Readonly<Record<string, EventRule>> = {
  ping: { about: 'a new webhook says hello', scopes: [] },
  meta: { about: 'the webhook itself was deleted', scopes: [] },
  push: { about: 'commits pushed: code, refs, and pushed_at in the repository and its lists', scopes: [...CODE, ...OWNER_LISTS] },
  create: { about: 'a branch or tag created', scopes: REFS },
  branch_protection_rule: { about: 'a branch protection rule created, edited, deleted (branches show it)', scopes: ['{repo}/branches/**'] },
  delete: { about: 'a branch or tag deleted', scopes: REFS },
  repository: {
    about: 'created, deleted, edited, renamed, transferred, archived, publicized, privatized',
    scopes: WHOLE_REPO,
    others: WHOLE_REPO,
  },
  public: { about: 'a private repository made public', scopes: WHOLE_REPO },
  fork: {
    about: 'forked: the count, the forks list, the new fork in its owner lists',
    scopes: ['{repo}', '{repo}/forks/**', ...OWNER_LISTS],
    others: OWNER_LISTS,
  },
  star: { about: 'starred or unstarred: stargazers_count', scopes: STARS },
  watch: { about: 'starred (GitHub sends watch "started" for a star)', scopes: STARS },
  issues: {
    about: 'an issue opened, edited, closed, labeled, assigned, transferred, deleted',
    scopes: ['{repo}', '{repo}/issues', '{repo}/issues/{number}/**', '{repo}/issues/events/**', '{repo}/milestones/**', ...OWNER_LISTS],
    others: ['{repo}', '{repo}/issues/**'],
  },
  issue_comment: {
    about: 'a comment on an issue or pull request',
    scopes: ['{repo}/issues', '{repo}/issues/{number}/**', '{repo}/issues/comments/**', '{repo}/pulls/{number}'],
  },
  label: {
    about: 'a label created, edited, deleted (issues and pull requests show it)',
    scopes: ['{repo}/labels/**', '{repo}/issues/**', '{repo}/pulls/**'],
  },
  milestone: {
    about: 'a milestone changed (issues and pull requests show it)',
    scopes: ['{repo}/milestones/**', '{repo}/issues/**', '{repo}/pulls/**'],
  },
  pull_request: {
    about: 'a pull request opened, edited, closed, merged, synchronized, labeled, review requested',
    scopes: [
      '{repo}',
      '{repo}/pulls',
      '{repo}/pulls/{number}/**',
      '{repo}/issues',
      '{repo}/issues/{number}/**',
      '{repo}/issues/events/**',
      ...OWNER_LISTS,
    ],
  },
  pull_request_review: { about: 'a review submitted, edited, dismissed', scopes: ['{repo}/pulls/{number}/**', '{repo}/pulls/comments/**'] },
  pull_request_review_comment: { about: 'a review comment', scopes: ['{repo}/pulls/{number}/**', '{repo}/pulls/comments/**'] },
  pull_request_review_thread: { about: 'a review thread resolved or unresolved', scopes: ['{repo}/pulls/{number}/**'] },
  commit_comment: { about: 'a comment on a commit', scopes: ['{repo}/comments/**', '{repo}/commits/**'] },
  release: { about: 'a release published, edited, deleted', scopes: ['{repo}/releases/**', '{repo}/tags/**'] },
  status: { about: 'a commit status', scopes: ['{repo}/commits/**', '{repo}/statuses/**'] },
  check_run: { about: 'a check run', scopes: CHECKS },
  check_suite: { about: 'a check suite', scopes: CHECKS },
  deployment: { about: 'a deployment', scopes: ['{repo}/deployments/**'] },
  deployment_status: { about: 'a deployment status', scopes: ['{repo}/deployments/**'] },
  workflow_run: { about: 'an Actions workflow run', scopes: ['{repo}/actions/runs/**'] },
  workflow_job: { about: 'an Actions job', scopes: ['{repo}/actions/runs/**', '{repo}/actions/jobs/**'] },
  member: {
    about: 'a collaborator added, removed, or their permission changed',
    scopes: ['{repo}', '{repo}/collaborators/**', '{repo}/invitations/**', '/user/repos', '/user/repository_invitations/**'],
  },
  membership: {
    about: 'a user added to or removed from a team',
    scopes: ['/orgs/{org}/teams/{team}/**', '/orgs/{org}/teams', '/user/teams', '/user/repos', '/user/memberships/orgs/**'],
  },
  organization: {
    about: 'members added, removed, invited; the organization renamed or deleted',
    scopes: ['/orgs/{org}/**', '/users/{org}', '/user/orgs', '/user/memberships/orgs/**', '/user/repos', '/users/{member}/orgs'],
    others: ['/orgs/{owner}/**', '/users/{owner}/**', '/repos/{owner}/**'],
  },
  team: { about: 'a team created, edited, deleted, given or refused a repository', scopes: TEAMS },
  team_add: { about: 'a repository added to a team', scopes: TEAMS },
  installation: {
    about: 'a GitHub App installed, uninstalled, suspended, its permissions changed',
    scopes: [
      '/app/installations/**',
      '/installation/repositories/**',
      '/user/installations/**',
      '/orgs/{owner}/installation',
      '/users/{owner}/installation',
    ],
    others: ['{repo}/installation'],
  },
  installation_repositories: {
    about: "repositories added to or removed from an App's installation",
    scopes: ['/app/installations/{installation}', '/installation/repositories/**', '/user/installations/{installation}/repositories/**'],
    others: ['{repo}/installation'],
  },
};

/** The templates of one table row, parsed ("/**" ending a prefix scope). */
export function parseTemplate(template: string): ScopeTemplate {
  return template.endsWith('/**') ? { path: template.slice(0, -3), prefix: true } : { path: template, prefix: false };
}
