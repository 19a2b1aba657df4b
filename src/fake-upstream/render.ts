/**
 * JSON rendering of accounts and repositories, GitHub-shaped. Every address points at the base
 * URL the request arrived at. Rendered strings are cached on the resource (the cache is replaced
 * when the resource mutates), keyed by base URL, API version and viewer permission class.
 */
import { iso, type Account, type Repo } from './data.js';
import type { PermissionClass } from './auth.js';

export const API_VERSIONS = ['2022-11-28', '2026-03-10'] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];
export const DEFAULT_API_VERSION: ApiVersion = '2022-11-28';
/** Versions newer than the default carry this marker field (a documented fake difference). */
const VERSION_MARKER = 'fake_api_version';

const nodeId = (prefix: string, kind: string, id: number): string => Buffer.from(`${prefix}:${kind}${id}`).toString('base64');

export function accountNodeId(a: Account): string {
  return a.type === 'Organization' ? nodeId('012', 'Organization', a.id) : nodeId('04', 'User', a.id);
}

export function accountSummary(a: Account, base: string): Record<string, unknown> {
  const key = `summary|${base}`;
  const hit = a.cache.get(key) as Record<string, unknown> | undefined;
  if (hit) return hit;
  const u = `${base}/users/${a.login}`;
  const summary = {
    login: a.login,
    id: a.id,
    node_id: accountNodeId(a),
    avatar_url: `${base}/avatars/u/${a.id}?v=4`,
    gravatar_id: '',
    url: u,
    html_url: `${base}/${a.login}`,
    followers_url: `${u}/followers`,
    following_url: `${u}/following{/other_user}`,
    gists_url: `${u}/gists{/gist_id}`,
    starred_url: `${u}/starred{/owner}{/repo}`,
    subscriptions_url: `${u}/subscriptions`,
    organizations_url: `${u}/orgs`,
    repos_url: `${u}/repos`,
    events_url: `${u}/events{/privacy}`,
    received_events_url: `${u}/received_events`,
    type: a.type,
    user_view_type: 'public',
    site_admin: false,
  };
  a.cache.set(key, summary);
  return summary;
}

/** GET /users/:login (public record). */
export function publicAccount(a: Account, publicRepos: number, base: string, version: ApiVersion): Record<string, unknown> {
  const record: Record<string, unknown> = {
    ...accountSummary(a, base),
    name: a.name,
    company: a.company,
    blog: a.blog,
    location: a.location,
    email: a.email,
    hireable: null,
    bio: a.bio,
    twitter_username: a.twitter,
    public_repos: publicRepos,
    public_gists: a.publicGists,
    followers: a.followers,
    following: a.following,
    created_at: iso(a.createdAt),
    updated_at: iso(a.updatedAt),
  };
  if (version !== DEFAULT_API_VERSION) record[VERSION_MARKER] = version;
  return record;
}

/** GET /user: the public record plus personal information. */
export function privateAccount(
  a: Account,
  counts: { publicRepos: number; privateRepos: number },
  base: string,
  version: ApiVersion,
): Record<string, unknown> {
  const record = publicAccount(a, counts.publicRepos, base, version);
  record.email = a.privateEmail;
  Object.assign(record, {
    notification_email: a.privateEmail,
    private_gists: a.privateGists,
    total_private_repos: counts.privateRepos,
    owned_private_repos: counts.privateRepos,
    disk_usage: 1024 + (a.id % 10_000),
    collaborators: 0,
    two_factor_authentication: true,
    plan: { name: 'free', space: 976562499, collaborators: 0, private_repos: 10000 },
  });
  return record;
}

const PERMISSIONS: Record<Exclude<PermissionClass, 'none'>, Record<string, boolean>> = {
  admin: { admin: true, maintain: true, push: true, triage: true, pull: true },
  write: { admin: false, maintain: false, push: true, triage: true, pull: true },
  read: { admin: false, maintain: false, push: false, triage: false, pull: true },
};

/** One repository as a JSON string (cached). Lists and the single resource use the same shape. */
export function repoJson(repo: Repo, perm: PermissionClass, base: string, version: ApiVersion): string {
  const key = `${perm}|${version}|${base}`;
  const hit = repo.cache.get(key) as string | undefined;
  if (hit !== undefined) return hit;
  const json = JSON.stringify(repoRecord(repo, perm, base, version));
  repo.cache.set(key, json);
  return json;
}

export function repoRecord(repo: Repo, perm: PermissionClass, base: string, version: ApiVersion): Record<string, unknown> {
  const owner = repo.owner;
  const full = `${owner.login}/${repo.name}`;
  const r = `${base}/repos/${full}`;
  const host = base.replace(/^https?:\/\//, '');
  const record: Record<string, unknown> = {
    id: repo.id,
    node_id: nodeId('010', 'Repository', repo.id),
    name: repo.name,
    full_name: full,
    private: repo.private,
    owner: accountSummary(owner, base),
    html_url: `${base}/${full}`,
    description: repo.description,
    fork: false,
    url: r,
    forks_url: `${r}/forks`,
    keys_url: `${r}/keys{/key_id}`,
    collaborators_url: `${r}/collaborators{/collaborator}`,
    teams_url: `${r}/teams`,
    hooks_url: `${r}/hooks`,
    issue_events_url: `${r}/issues/events{/number}`,
    events_url: `${r}/events`,
    assignees_url: `${r}/assignees{/user}`,
    branches_url: `${r}/branches{/branch}`,
    tags_url: `${r}/tags`,
    blobs_url: `${r}/git/blobs{/sha}`,
    git_tags_url: `${r}/git/tags{/sha}`,
    git_refs_url: `${r}/git/refs{/sha}`,
    trees_url: `${r}/git/trees{/sha}`,
    statuses_url: `${r}/statuses/{sha}`,
    languages_url: `${r}/languages`,
    stargazers_url: `${r}/stargazers`,
    contributors_url: `${r}/contributors`,
    subscribers_url: `${r}/subscribers`,
    subscription_url: `${r}/subscription`,
    commits_url: `${r}/commits{/sha}`,
    git_commits_url: `${r}/git/commits{/sha}`,
    comments_url: `${r}/comments{/number}`,
    issue_comment_url: `${r}/issues/comments{/number}`,
    contents_url: `${r}/contents/{+path}`,
    compare_url: `${r}/compare/{base}...{head}`,
    merges_url: `${r}/merges`,
    archive_url: `${r}/{archive_format}{/ref}`,
    downloads_url: `${r}/downloads`,
    issues_url: `${r}/issues{/number}`,
    pulls_url: `${r}/pulls{/number}`,
    milestones_url: `${r}/milestones{/number}`,
    notifications_url: `${r}/notifications{?since,all,participating}`,
    labels_url: `${r}/labels{/name}`,
    releases_url: `${r}/releases{/id}`,
    deployments_url: `${r}/deployments`,
    created_at: iso(repo.createdAt),
    updated_at: iso(repo.updatedAt),
    pushed_at: iso(repo.pushedAt),
    git_url: `git://${host}/${full}.git`,
    ssh_url: `git@${host}:${full}.git`,
    clone_url: `${base}/${full}.git`,
    svn_url: `${base}/${full}`,
    homepage: repo.homepage,
    size: repo.size,
    stargazers_count: repo.stargazers,
    watchers_count: repo.stargazers,
    language: repo.language,
    has_issues: true,
    has_projects: true,
    has_downloads: true,
    has_wiki: repo.hasWiki,
    has_pages: repo.hasPages,
    has_discussions: false,
    forks_count: repo.forks,
    mirror_url: null,
    archived: false,
    disabled: false,
    open_issues_count: repo.openIssues,
    license: {
      key: repo.license.key,
      name: repo.license.name,
      spdx_id: repo.license.spdx_id,
      url: `${base}/licenses/${repo.license.key}`,
      node_id: repo.license.node_id,
    },
    allow_forking: true,
    is_template: false,
    web_commit_signoff_required: false,
    topics: repo.topics,
    visibility: repo.private ? 'private' : 'public',
    forks: repo.forks,
    open_issues: repo.openIssues,
    watchers: repo.stargazers,
    default_branch: 'main',
  };
  if (perm !== 'none') record.permissions = PERMISSIONS[perm];
  record.temp_clone_token = null;
  if (owner.type === 'Organization') record.organization = accountSummary(owner, base);
  record.network_count = repo.forks;
  record.subscribers_count = repo.subscribers;
  if (version !== DEFAULT_API_VERSION) record[VERSION_MARKER] = version;
  return record;
}
