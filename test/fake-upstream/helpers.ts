/** Helpers for the fake-upstream tests: real HTTP over loopback with Node's global fetch. */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll } from 'vitest';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamOptions } from '../../fake-github/index.js';

export const ALICE_REPO = 'demo_token_alice_repo';
export const ALICE_PUBLIC = 'demo_token_alice_public';
export const BOB_PUBLIC = 'demo_token_bob_public';
export const CAROL_REPO = 'demo_token_carol_repo';
export const OCTOCAT_REPO = 'demo_token_octocat_repo';

/** An answer read in full. */
export interface Got {
  status: number;
  headers: Headers;
  text: string;
  /**
   * The body parsed as JSON, typed as the shape the caller names (`unknown` when it names none).
   * Nothing checks that shape: the test's assertions on the body do.
   */
  json: <Body = unknown>() => Body;
}

/** A JSON object whose members the test reads by name; each is `unknown` until narrowed. */
export type JsonObject = Record<string, unknown>;

/** GitHub's error body, also used by the fake's control endpoints. */
export interface ErrorBody {
  message: string;
  documentation_url: string;
}

/** An account record or summary, with the members the tests compute with. */
export type AccountBody = JsonObject & { node_id: string; followers: number };

/** A repository record or list item, with the members the tests compute with or descend into. */
export type RepoBody = JsonObject & {
  full_name: string;
  private: boolean;
  updated_at: string;
  stargazers_count: number;
  owner: JsonObject;
  license: JsonObject;
  /** Only on a repository an organization owns. */
  organization?: JsonObject;
  /** Only for an authenticated caller. */
  permissions?: JsonObject;
};

/** A rate-limit window as GET /rate_limit lists it. */
export interface RateWindowBody {
  limit: number;
  remaining: number;
  reset: number;
  used: number;
  resource: string;
}

/** The body of GET /rate_limit. */
export interface RateLimitBody {
  resources: { core: RateWindowBody };
  rate?: RateWindowBody;
}

/**
 * A request with Node's fetch, which asks for gzip unless told otherwise and decodes what it gets:
 * here it asks for identity unless the test names a coding, so that lengths are those of the JSON.
 */
export async function get(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Got> {
  const res = await fetch(url, { method, headers: { 'accept-encoding': 'identity', ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <Body>() => JSON.parse(text) as Body };
}

export const auth = (token: string): Record<string, string> => ({ authorization: `token ${token}` });

export async function post(url: string, body: unknown, raw = false): Promise<Got> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: raw ? (body as string) : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: <Body>() => JSON.parse(text) as Body };
}

/** Rate-limit headers as numbers. */
export function rate(headers: Headers): { limit: number; remaining: number; used: number; reset: number } {
  return {
    limit: Number(headers.get('x-ratelimit-limit')),
    remaining: Number(headers.get('x-ratelimit-remaining')),
    used: Number(headers.get('x-ratelimit-used')),
    reset: Number(headers.get('x-ratelimit-reset')),
  };
}

/** A raw request with a chosen Host header (fetch does not allow setting it). */
export function rawGet(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Polls until `check` returns a value, or fails after the deadline. */
export async function until<T>(check: () => Promise<T | undefined>, deadlineMs = 4000, stepMs = 25): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const result = await check();
    if (result !== undefined) return result;
    if (Date.now() > end) throw new Error('condition not met before the deadline');
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** Every `*_url` value in a JSON value (recursively), with its key path. */
export function urlFields(value: unknown, path = ''): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => out.push(...urlFields(v, `${path}[${i}]`)));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, member] of Object.entries(value)) {
      if (key === 'url' || key.endsWith('_url')) out.push([`${path}.${key}`, member]);
      out.push(...urlFields(member, `${path}.${key}`));
    }
  }
  return out;
}

/** The string-valued url and *_url fields of a value, by path. */
export function stringUrlFields(value: unknown): Array<[string, string]> {
  return urlFields(value).filter((pair): pair is [string, string] => typeof pair[1] === 'string');
}

/** Paths of the web and git addresses among them (GitHub's web, never the API). */
export const WEB_URL_FIELD = /\.(html_url|clone_url|svn_url|git_url|ssh_url|avatar_url)$/;

export const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

// Field lists copied from the interface's tables.
export const USER_FIELDS = ['login', 'id', 'node_id', 'avatar_url', 'gravatar_id', 'url'];
export const SUMMARY_FIELDS = [
  ...USER_FIELDS,
  'html_url',
  'followers_url',
  'following_url',
  'gists_url',
  'starred_url',
  'subscriptions_url',
  'organizations_url',
  'repos_url',
  'events_url',
  'received_events_url',
  'type',
  'site_admin',
];
export const REPO_URL_FIELDS = (
  'forks_url, keys_url, collaborators_url, teams_url, hooks_url, issue_events_url, events_url, assignees_url, ' +
  'branches_url, tags_url, blobs_url, git_tags_url, git_refs_url, trees_url, statuses_url, languages_url, ' +
  'stargazers_url, contributors_url, subscribers_url, subscription_url, commits_url, git_commits_url, comments_url, ' +
  'issue_comment_url, contents_url, compare_url, merges_url, archive_url, downloads_url, issues_url, pulls_url, ' +
  'milestones_url, notifications_url, labels_url, releases_url, deployments_url'
).split(', ');
export const REPO_FIELDS = [
  'id',
  'node_id',
  'name',
  'full_name',
  'private',
  'owner',
  'html_url',
  'description',
  'fork',
  'url',
  ...REPO_URL_FIELDS,
  'created_at',
  'updated_at',
  'pushed_at',
  'git_url',
  'ssh_url',
  'clone_url',
  'svn_url',
  'homepage',
  'size',
  'stargazers_count',
  'watchers_count',
  'forks_count',
  'open_issues_count',
  'forks',
  'open_issues',
  'watchers',
  'network_count',
  'subscribers_count',
  'language',
  'has_issues',
  'has_projects',
  'has_downloads',
  'has_wiki',
  'has_pages',
  'archived',
  'disabled',
  'mirror_url',
  'temp_clone_token',
  'license',
  'default_branch',
];

/**
 * Starts a fake upstream for the enclosing describe block (closed after it) and returns a handle
 * that reads through to it, so tests can write `fake.url` without their own hooks.
 */
export function useFake(opts: FakeUpstreamOptions = {}): FakeUpstream {
  let started: FakeUpstream | undefined;
  beforeAll(async () => {
    started = await startFakeUpstream(opts);
  });
  afterAll(async () => {
    await started?.close();
  });
  const current = (): FakeUpstream => {
    if (started === undefined) throw new Error('the fake upstream is not started yet (use it inside a test)');
    return started;
  };
  return {
    get url() {
      return current().url;
    },
    get apiUrl() {
      return current().apiUrl;
    },
    get server() {
      return current().server;
    },
    stats: () => current().stats(),
    reset: () => current().reset(),
    close: () => current().close(),
  };
}
