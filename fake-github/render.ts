/**
 * JSON rendering of accounts and repositories, GitHub-shaped. Every API address points at the base
 * URL the request arrived at; web addresses (html_url, clone_url, avatars) at the web beside it (webBaseOf). Rendered strings are cached on the resource (the cache is replaced
 * when the resource mutates), keyed by base URL, API version and viewer permission class.
 */
import { iso, type Account, type Repo } from './data.js';
import type { PermissionClass } from './auth.js';

export const API_VERSIONS = ['2022-11-28', '2026-03-10'] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];
export const DEFAULT_API_VERSION: ApiVersion = '2022-11-28';
/** Versions newer than the default carry this marker field (a documented fake difference). */
const VERSION_MARKER = 'fake_api_version';

/**
 * The web addresses of a resource, as GitHub gives them beside its API addresses: on GitHub.com
 * the API is api.github.com and the web is github.com (avatars on avatars.githubusercontent.com);
 * on an API under a base path (Enterprise Server's `/api/v3`) the web is the same origin's root.
 * The fake serves no web pages: these are addresses to show, as GitHub's are to an API client.
 */
export interface WebBase {
  /** html_url, clone_url, svn_url. */
  web: string;
  /** git_url and ssh_url's host. */
  gitHost: string;
  /** avatar_url, without the trailing /u/<id>. */
  avatars: string;
  /** A file's download_url, without the trailing /<owner>/<repo>/<ref>/<path>. */
  raw: string;
}
const GITHUB_WEB: WebBase = {
  web: 'https://github.com',
  gitHost: 'github.com',
  avatars: 'https://avatars.githubusercontent.com',
  raw: 'https://raw.githubusercontent.com',
};
const webBases = new Map<string, WebBase>();

export function webBaseOf(apiBase: string): WebBase {
  const known = webBases.get(apiBase);
  if (known !== undefined) return known;
  const origin = /^https?:\/\/[^/]+/.exec(apiBase)?.[0] ?? apiBase;
  const found =
    origin === apiBase
      ? GITHUB_WEB
      : { web: origin, gitHost: origin.replace(/^https?:\/\//, ''), avatars: `${origin}/avatars`, raw: `${origin}/raw` };
  if (webBases.size > 1000) webBases.clear();
  webBases.set(apiBase, found);
  return found;
}

const nodeId = (prefix: string, kind: string, id: number): string => Buffer.from(`${prefix}:${kind}${id}`).toString('base64');

export function repoNodeId(repo: Repo): string {
  return nodeId('010', 'Repository', repo.id);
}

export function accountNodeId(account: Account): string {
  return account.type === 'Organization' ? nodeId('012', 'Organization', account.id) : nodeId('04', 'User', account.id);
}

export function accountSummary(account: Account, base: string): Record<string, unknown> {
  const key = `summary|${base}`;
  const hit = account.cache.get(key) as Record<string, unknown> | undefined;
  if (hit) return hit;
  const userUrl = `${base}/users/${account.login}`;
  const summary = {
    login: account.login,
    id: account.id,
    node_id: accountNodeId(account),
    avatar_url: `${webBaseOf(base).avatars}/u/${account.id}?v=4`,
    gravatar_id: '',
    url: userUrl,
    html_url: `${webBaseOf(base).web}/${account.login}`,
    followers_url: `${userUrl}/followers`,
    following_url: `${userUrl}/following{/other_user}`,
    gists_url: `${userUrl}/gists{/gist_id}`,
    starred_url: `${userUrl}/starred{/owner}{/repo}`,
    subscriptions_url: `${userUrl}/subscriptions`,
    organizations_url: `${userUrl}/orgs`,
    repos_url: `${userUrl}/repos`,
    events_url: `${userUrl}/events{/privacy}`,
    received_events_url: `${userUrl}/received_events`,
    type: account.type,
    user_view_type: 'public',
    site_admin: false,
  };
  account.cache.set(key, summary);
  return summary;
}

/** GET /users/:login (public record). */
export function publicAccount(account: Account, publicRepos: number, base: string, version: ApiVersion): Record<string, unknown> {
  const record: Record<string, unknown> = {
    ...accountSummary(account, base),
    name: account.name,
    company: account.company,
    blog: account.blog,
    location: account.location,
    email: account.email,
    hireable: null,
    bio: account.bio,
    twitter_username: account.twitter,
    public_repos: publicRepos,
    public_gists: account.publicGists,
    followers: account.followers,
    following: account.following,
    created_at: iso(account.createdAt),
    updated_at: iso(account.updatedAt),
  };
  if (version !== DEFAULT_API_VERSION) record[VERSION_MARKER] = version;
  return record;
}

/** GET /user: the public record plus personal information. */
export function privateAccount(
  account: Account,
  counts: { publicRepos: number; privateRepos: number },
  base: string,
  version: ApiVersion,
): Record<string, unknown> {
  const record = publicAccount(account, counts.publicRepos, base, version);
  record.email = account.privateEmail;
  Object.assign(record, {
    notification_email: account.privateEmail,
    private_gists: account.privateGists,
    total_private_repos: counts.privateRepos,
    owned_private_repos: counts.privateRepos,
    disk_usage: 1024 + (account.id % 10_000),
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
  const repoUrl = `${base}/repos/${full}`;
  const web = webBaseOf(base);
  const record: Record<string, unknown> = {
    id: repo.id,
    node_id: repoNodeId(repo),
    name: repo.name,
    full_name: full,
    private: repo.private,
    owner: accountSummary(owner, base),
    html_url: `${web.web}/${full}`,
    description: repo.description,
    fork: false,
    url: repoUrl,
    forks_url: `${repoUrl}/forks`,
    keys_url: `${repoUrl}/keys{/key_id}`,
    collaborators_url: `${repoUrl}/collaborators{/collaborator}`,
    teams_url: `${repoUrl}/teams`,
    hooks_url: `${repoUrl}/hooks`,
    issue_events_url: `${repoUrl}/issues/events{/number}`,
    events_url: `${repoUrl}/events`,
    assignees_url: `${repoUrl}/assignees{/user}`,
    branches_url: `${repoUrl}/branches{/branch}`,
    tags_url: `${repoUrl}/tags`,
    blobs_url: `${repoUrl}/git/blobs{/sha}`,
    git_tags_url: `${repoUrl}/git/tags{/sha}`,
    git_refs_url: `${repoUrl}/git/refs{/sha}`,
    trees_url: `${repoUrl}/git/trees{/sha}`,
    statuses_url: `${repoUrl}/statuses/{sha}`,
    languages_url: `${repoUrl}/languages`,
    stargazers_url: `${repoUrl}/stargazers`,
    contributors_url: `${repoUrl}/contributors`,
    subscribers_url: `${repoUrl}/subscribers`,
    subscription_url: `${repoUrl}/subscription`,
    commits_url: `${repoUrl}/commits{/sha}`,
    git_commits_url: `${repoUrl}/git/commits{/sha}`,
    comments_url: `${repoUrl}/comments{/number}`,
    issue_comment_url: `${repoUrl}/issues/comments{/number}`,
    contents_url: `${repoUrl}/contents/{+path}`,
    compare_url: `${repoUrl}/compare/{base}...{head}`,
    merges_url: `${repoUrl}/merges`,
    archive_url: `${repoUrl}/{archive_format}{/ref}`,
    downloads_url: `${repoUrl}/downloads`,
    issues_url: `${repoUrl}/issues{/number}`,
    pulls_url: `${repoUrl}/pulls{/number}`,
    milestones_url: `${repoUrl}/milestones{/number}`,
    notifications_url: `${repoUrl}/notifications{?since,all,participating}`,
    labels_url: `${repoUrl}/labels{/name}`,
    releases_url: `${repoUrl}/releases{/id}`,
    deployments_url: `${repoUrl}/deployments`,
    created_at: iso(repo.createdAt),
    updated_at: iso(repo.updatedAt),
    pushed_at: iso(repo.pushedAt),
    git_url: `git://${web.gitHost}/${full}.git`,
    ssh_url: `git@${web.gitHost}:${full}.git`,
    clone_url: `${web.web}/${full}.git`,
    svn_url: `${web.web}/${full}`,
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
