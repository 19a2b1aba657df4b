/**
 * Issues the fake opens, and repositories it creates, on request (POST /__fake/issues, POST
 * /__fake/repos), each with the webhook GitHub sends for it (`issues` opened, `repository`
 * created). Opening an issue changes the repository as on GitHub: `open_issues_count` goes up, a
 * new `updated_at`, a new ETag. GraphQL shows the issues the fake opened under `Repository.issues`
 * (graphql-schema.ts); the seed repositories' `open_issues_count` has no issue objects behind it.
 */
import { iso, mutateRepo, type Repo, type World } from './data.js';
import { accountSummary, repoRecord, DEFAULT_API_VERSION } from './render.js';
import { orgSimple } from './orgs.js';
import type { Announcement } from './webhook-payloads.js';

export interface Issue {
  readonly id: number;
  readonly number: number;
  readonly title: string;
  readonly state: 'open' | 'closed';
  readonly createdAt: number;
  readonly repo: Repo;
  readonly author: string;
}

/** Issues per world (a reset makes a new world, and forgets them), by repository id. */
const issuesByWorld = new WeakMap<World, Map<number, Issue[]>>();

function issuesOf(world: World): Map<number, Issue[]> {
  let issues = issuesByWorld.get(world);
  if (issues === undefined) issuesByWorld.set(world, (issues = new Map()));
  return issues;
}

/** The issues of a repository, oldest first. */
export function repoIssues(world: World, repo: Repo): readonly Issue[] {
  return issuesOf(world).get(repo.id) ?? [];
}

/** GitHub's legacy global node id of an issue (`MDU6SXNzdWU...`: "05:Issue<id>"). */
export function issueNodeId(issue: Issue): string {
  return Buffer.from(`05:Issue${issue.id}`).toString('base64');
}

/** Opens an issue on `repo` as `author`. */
export function openIssue(world: World, repo: Repo, title: string, author: string, nowMs = Date.now()): Issue {
  const all = issuesOf(world);
  const list = all.get(repo.id) ?? [];
  all.set(repo.id, list);
  const number = list.length + 1;
  const issue: Issue = { id: 1_000_000_000 + repo.id * 1000 + number, number, title, state: 'open', createdAt: nowMs, repo, author };
  list.push(issue);
  repo.openIssues++;
  mutateRepo(world, repo);
  return issue;
}

/** The issue as a webhook payload carries it (the REST issue, its main fields). */
function issueRecord(world: World, issue: Issue, base: string): Record<string, unknown> {
  const { repo } = issue;
  const url = `${base}/repos/${repo.owner.login}/${repo.name}/issues/${issue.number}`;
  const author = world.account(issue.author);
  return {
    url,
    repository_url: `${base}/repos/${repo.owner.login}/${repo.name}`,
    id: issue.id,
    node_id: issueNodeId(issue),
    number: issue.number,
    title: issue.title,
    user: author === undefined ? null : accountSummary(author, base),
    labels: [],
    state: issue.state,
    locked: false,
    comments: 0,
    created_at: iso(issue.createdAt),
    updated_at: iso(issue.createdAt),
    closed_at: null,
    body: null,
  };
}

function aboutRepo(world: World, repo: Repo, base: string, sender: string): Record<string, unknown> {
  const out: Record<string, unknown> = { repository: repoRecord(repo, 'none', base, DEFAULT_API_VERSION) };
  if (repo.owner.type === 'Organization') out.organization = orgSimple(repo.owner, base);
  const who = world.account(sender);
  if (who !== undefined) out.sender = { ...accountSummary(who, base), user_view_type: 'public' };
  return out;
}

const targetOf = (repo: Repo): Announcement['target'] =>
  repo.owner.type === 'Organization' ? { id: repo.owner.id, type: 'organization' } : { id: repo.id, type: 'repository' };

/** `issues` (opened), as GitHub sends it. */
export function issueOpened(world: World, issue: Issue, base: string): Announcement[] {
  const payload = { action: 'opened', issue: issueRecord(world, issue, base), ...aboutRepo(world, issue.repo, base, issue.author) };
  return [{ event: 'issues', payload, target: targetOf(issue.repo) }];
}

/** `repository` (created), as GitHub sends it. */
export function repositoryCreated(world: World, repo: Repo, base: string, sender: string): Announcement[] {
  return [{ event: 'repository', payload: { action: 'created', ...aboutRepo(world, repo, base, sender) }, target: targetOf(repo) }];
}
