/**
 * Pure reading of what the upstream says about the token that fetched an answer: the
 * x-ratelimit-* headers, GET /rate_limit's body (every resource), Retry-After, and the verdict of
 * a status (fine, a 401 to confirm, primary limit spent, secondary limit). What the verdict then
 * does to the token's numbers is state.ts's job. Which rate-limit resource a request spends
 * (`resourceOf`) and what the answers say of the tokens' OAuth scopes (`learnScopes`) are here too.
 *
 * A 401 on a request is `unauthorized`, not `dead`: GitHub answers 401 to a good token on
 * endpoints that want another kind of credential (App-only ones such as GET /app), so only GET
 * /rate_limit answering 401 for the same token proves it bad (confirm.ts).
 */
import type { HeaderLookup, RateObservation, UnauthorizedKind, Verdict } from './types.js';
import { parseHttpDate } from '../../http/headers/fields.js';
import { graphqlEndpoint, basePrefixOf } from '../../http/route.js';

function int(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d{1,15}\s*$/.test(value)) return undefined;
  return Number(value);
}

/** Reads x-ratelimit-limit/remaining/reset/resource; undefined unless all three numbers are there. */
export function readRateLimit(header: HeaderLookup): RateObservation | undefined {
  const limit = int(header('x-ratelimit-limit'));
  const remaining = int(header('x-ratelimit-remaining'));
  const reset = int(header('x-ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  return { limit, remaining: Math.min(remaining, limit), reset, resource: (header('x-ratelimit-resource') ?? 'core').trim().toLowerCase() };
}

const RATE_LIMIT_NUMBERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-used'] as const;

/**
 * Whether an answer names a rate limit at all: any of x-ratelimit-limit, -remaining, -reset or
 * -used, whatever its value. An answer without any is silent (state.ts `react`): the upstream may
 * apply no rate limit. Garbage values are not silence: they teach nothing, and end nothing.
 */
export function mentionsRateLimit(header: HeaderLookup): boolean {
  return RATE_LIMIT_NUMBERS.some((name) => header(name) !== undefined);
}

/** GitHub Enterprise Server's answer to GET /rate_limit when its administrator left rate limiting off (its default): a 404. */
export const RATE_LIMITING_OFF_MESSAGE = 'Rate limiting is not enabled.';
export const RATE_LIMITING_OFF_DOCS_URL = 'https://docs.github.com/enterprise-server@latest/rest/rate-limit/rate-limit';

/** Whether GET /rate_limit's answer says the upstream applies no rate limit (a 404 with GitHub's message). */
export function rateLimitingOff(status: number, body: string): boolean {
  if (status !== 404) return false;
  const parsed = parseBody(body) as { message?: unknown } | undefined;
  return parsed?.message === RATE_LIMITING_OFF_MESSAGE;
}

/** One budget of GET /rate_limit's body, if its numbers are whole and not negative. */
function budgetOf(value: unknown, resource: string): RateObservation | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { limit, remaining, reset } = value as Record<string, unknown>;
  const whole = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  if (!whole(limit) || !whole(remaining) || !whole(reset)) return undefined;
  return { limit, remaining: Math.min(remaining, limit), reset, resource };
}

function parseBody(body: string): { resources?: Record<string, unknown>; rate?: unknown } | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    return parsed !== null && typeof parsed === 'object' ? (parsed as { resources?: Record<string, unknown>; rate?: unknown }) : undefined;
  } catch {
    return undefined;
  }
}

/** Reads GET /rate_limit's body into the core observation (GitHub's shape: resources.core). */
export function rateLimitFromBody(body: string): RateObservation | undefined {
  const parsed = parseBody(body);
  const resources = parsed?.resources;
  return (
    budgetOf(resources !== null && typeof resources === 'object' ? resources.core : undefined, 'core') ?? budgetOf(parsed?.rate, 'core')
  );
}

/**
 * Reads every budget of GET /rate_limit's body: one observation per resource GitHub has (unknown
 * names are ignored), core first (from `rate` when `resources` lacks it).
 */
export function rateLimitsFromBody(body: string): RateObservation[] {
  const parsed = parseBody(body);
  if (parsed === undefined) return [];
  const resources = parsed.resources !== null && typeof parsed.resources === 'object' ? parsed.resources : {};
  const out: RateObservation[] = [];
  for (const name of RESOURCES) {
    const found =
      budgetOf(Object.hasOwn(resources, name) ? resources[name] : undefined, name) ??
      (name === 'core' ? budgetOf(parsed.rate, name) : undefined);
    if (found !== undefined) out.push(found);
  }
  return out;
}

const SECONDARY = /secondary rate limit/i;

/** Parses Retry-After (delta seconds or an HTTP date) into ms from `now`. */
export function retryAfterMs(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const secs = int(value);
  if (secs !== undefined) return secs * 1000;
  const at = parseHttpDate(value, nowMs);
  return at === undefined ? undefined : Math.max(0, at - nowMs);
}

/**
 * Classifies an upstream answer for the token that fetched it. `body` is the response text when
 * it was read (needed only for a secondary limit announced in the message alone).
 */
export function classify(status: number, header: HeaderLookup, body: string | undefined, nowMs: number): Verdict {
  if (status === 401) return { kind: 'unauthorized' };
  if (status !== 403 && status !== 429) return { kind: 'ok' };
  const retry = retryAfterMs(header('retry-after'), nowMs);
  const remaining = int(header('x-ratelimit-remaining'));
  if (body !== undefined && SECONDARY.test(body)) return { kind: 'secondary', retryAfterMs: retry };
  if (remaining === 0) return { kind: 'exhausted', reset: int(header('x-ratelimit-reset')) };
  if (retry !== undefined) return { kind: 'secondary', retryAfterMs: retry };
  // A 429 without any clue is a rate limit of some kind: back off as for a secondary limit.
  if (status === 429) return { kind: 'secondary', retryAfterMs: undefined };
  return { kind: 'ok' }; // a plain 403 (forbidden resource) says nothing about the token
}

/**
 * What kind of 401 a body is: `credentials` when GitHub says the credential itself is bad ("Bad
 * credentials": every endpoint answers so for an unknown or revoked token), else `request` (an
 * endpoint that wants another kind of credential, such as an App's JWT). Each kind is confirmed on
 * its own, so a burst of App-only 401s never delays noticing a token revoked since.
 */
export function unauthorizedKind(body: string | undefined): UnauthorizedKind {
  return body !== undefined && /"message"\s*:\s*"bad credentials/i.test(body.slice(0, 512)) ? 'credentials' : 'request';
}

/**
 * Whether a request that got this verdict should be tried again on another token at once. An
 * unconfirmed 401 is not: it is retried only once GET /rate_limit confirmed it (pooled-fetch.ts).
 */
export function retryable(verdict: Verdict): boolean {
  return verdict.kind !== 'ok' && verdict.kind !== 'unauthorized';
}

/*
 * GitHub's rate-limit resources. Each token has a separate budget per resource, named by
 * `x-ratelimit-resource` and listed by GET /rate_limit's `resources`: spending or pausing one
 * never says anything about another. A request's resource follows from its upstream path below
 * the base path: `/search/code` is `code_search`, any other `/search/*` is `search`, `/graphql` is
 * `graphql` (on Enterprise Server, whose REST base is `/api/v3`, GraphQL's `/api/graphql` too:
 * src/http/route.ts), and the rest is `core`. The other resources are learnt and reported,
 * never reserved.
 *
 * Only the names below are accepted from the upstream: an unknown name is ignored, so a hostile
 * answer can neither grow the pool's state nor add metric labels.
 */
/** In GET /rate_limit's order; the fake GitHub has its own list, kept equal by test/unit/token-resources.test.ts. */
export const RESOURCES = [
  'core',
  'search',
  'code_search',
  'graphql',
  'integration_manifest',
  'dependency_snapshots',
  'code_scanning_upload',
  'actions_runner_registration',
  'source_import',
  'audit_log',
] as const;

export type Resource = (typeof RESOURCES)[number];

const KNOWN: ReadonlySet<string> = new Set(RESOURCES);

/** A resource name as the upstream sent it, if it is one of GitHub's (case and spaces ignored). */
export function resourceNamed(name: string | undefined): Resource | undefined {
  if (name === undefined) return undefined;
  const normal = name.trim().toLowerCase();
  return KNOWN.has(normal) ? (normal as Resource) : undefined;
}

/** Whether `path` has `segment` at `at`, followed by its end, a query or (when `deeper`) a slash. */
function segmentAt(path: string, at: number, segment: string, deeper: boolean): boolean {
  if (!path.startsWith(segment, at)) return false;
  const next = path.charCodeAt(at + segment.length);
  return Number.isNaN(next) || next === 0x3f /* ? */ || (deeper && next === 0x2f); /* / */
}

/**
 * The GraphQL endpoint of a base path when it is not `<base>/graphql` (Enterprise Server), else
 * undefined. Worked out per call: only a path outside its base (that endpoint, or nothing) gets here.
 */
function endpointOutside(basePath: string, prefix: string): string | undefined {
  const endpoint = graphqlEndpoint(basePath);
  return endpoint === `${prefix}/graphql` ? undefined : endpoint;
}

/**
 * The resource of an upstream path (with or without its query) under the upstream's base path
 * (`/` or e.g. `/api/v3`). Allocates nothing for a root base path: it runs on every pooled hit.
 */
export function resourceOf(path: string, basePath = '/'): Resource {
  const prefix = basePath === '/' ? '' : basePrefixOf(basePath);
  if (prefix !== '' && !path.startsWith(prefix)) {
    const endpoint = endpointOutside(basePath, prefix);
    if (endpoint !== undefined && segmentAt(path, 0, endpoint, false)) return 'graphql';
  }
  const at = prefix !== '' && path.startsWith(prefix) ? prefix.length : 0;
  if (segmentAt(path, at, '/graphql', false)) return 'graphql';
  if (!segmentAt(path, at, '/search', true)) return 'core';
  return segmentAt(path, at, '/search/code', true) ? 'code_search' : 'search';
}

/*
 * Pool tokens' OAuth scopes, as the upstream reports them (`X-OAuth-Scopes`, on every answer to a
 * classic token), and whether they agree. Pure.
 *
 * Only classic tokens' scope sets are compared: a fine-grained personal access token and an App
 * installation token send no `X-OAuth-Scopes` (they have permissions, which the upstream does not
 * tell), and a member not heard from yet is unknown. Such members never make the pool differ; two
 * classic tokens with different sets do. `pool.equivalent: true` then stops holding: the pool is
 * served as non-equivalent (a cache partition per token) until the sets agree again.
 */
/** Where a member's scopes come from: its answers' header, answers without it, or nothing yet. */
export type ScopesFrom = 'x-oauth-scopes' | 'not-sent' | 'unseen';

/** A member's scopes as the pool keeps them: the header's text as received, and the set it names. */
export interface MemberScopes {
  readonly from: ScopesFrom;
  /** The header's value as received (compared first: the same text needs no parsing). */
  readonly raw: string | undefined;
  /** Sorted, without duplicates; empty unless `from` is `x-oauth-scopes`. */
  readonly scopes: readonly string[];
}

export const UNSEEN_SCOPES: MemberScopes = { from: 'unseen', raw: undefined, scopes: [] };
const NOT_SENT: MemberScopes = { from: 'not-sent', raw: undefined, scopes: [] };

/** `X-OAuth-Scopes` as a sorted set: comma separated, spaces around each ignored. */
export function parseScopes(header: string): readonly string[] {
  const set = new Set<string>();
  for (const part of header.split(',')) {
    const scope = part.trim();
    if (scope !== '') set.add(scope);
  }
  return [...set].sort();
}

/**
 * What an answer teaches of a member's scopes, or undefined when nothing changes. A header sets
 * them; its absence counts only on a successful answer of a member whose scopes are not known (an
 * answer of another upstream, or an error page, never erases a classic token's set).
 */
export function learnScopes(current: MemberScopes, header: string | undefined, status: number): MemberScopes | undefined {
  if (header !== undefined) {
    if (current.from === 'x-oauth-scopes' && current.raw === header) return undefined;
    return { from: 'x-oauth-scopes', raw: header, scopes: parseScopes(header) };
  }
  if (current.from !== 'unseen' || status < 200 || status >= 400) return undefined;
  return NOT_SENT;
}

/** A member's scopes as /admin/tokens shows them. */
export interface ScopesRow {
  readonly name: string;
  /** The scopes reported (sorted); null when the member sends none or is not heard from yet (`scopes_from`). */
  readonly scopes: readonly string[] | null;
  readonly scopes_from: ScopesFrom;
}

export function scopesRow(name: string, member: MemberScopes): ScopesRow {
  return { name, scopes: member.from === 'x-oauth-scopes' ? member.scopes : null, scopes_from: member.from };
}

/** The classic members grouped by scope set; the members whose scopes cannot be compared. */
export interface ScopeAgreement {
  /** Two classic members or more report different scope sets. */
  readonly differ: boolean;
  /** One group per scope set, in the members' order: the names of the members that report it. */
  readonly groups: ReadonlyArray<{ scopes: readonly string[]; tokens: readonly string[] }>;
  /** Members not compared: they send no X-OAuth-Scopes, or were not heard from yet. */
  readonly unchecked: readonly string[];
}

/** Whether the members' reported scopes agree (see the top of this file). */
export function scopeAgreement(rows: readonly ScopesRow[]): ScopeAgreement {
  const groups = new Map<string, { scopes: readonly string[]; tokens: string[] }>();
  const unchecked: string[] = [];
  for (const row of rows) {
    if (row.scopes === null) {
      unchecked.push(row.name);
      continue;
    }
    const id = row.scopes.join(',');
    const group = groups.get(id);
    if (group === undefined) groups.set(id, { scopes: row.scopes, tokens: [row.name] });
    else group.tokens.push(row.name);
  }
  const list = [...groups.values()];
  return { differ: list.length > 1, groups: list, unchecked };
}

/** What /admin/tokens and the status page show of the pool's equivalence. */
export interface EquivalenceReport {
  /** `pool.equivalent` as configured. */
  readonly equivalent_configured: boolean;
  /** What the cache does now: one partition for the pool (true), or one per token. */
  readonly equivalent: boolean;
  readonly scopes_differ: boolean;
  readonly scope_groups: ScopeAgreement['groups'];
  readonly scopes_unchecked: readonly string[];
}

export function equivalenceReport(configured: boolean, rows: readonly ScopesRow[]): EquivalenceReport {
  const agreement = scopeAgreement(rows);
  return {
    equivalent_configured: configured,
    equivalent: configured && !agreement.differ,
    scopes_differ: agreement.differ,
    scope_groups: agreement.groups,
    scopes_unchecked: agreement.unchecked,
  };
}

/** A key of the groups, to tell whether an agreement changed (the warning is logged once per change). */
export function agreementKey(agreement: ScopeAgreement): string {
  return agreement.differ ? agreement.groups.map((group) => `${group.scopes.join(',')}=${group.tokens.join(',')}`).join(';') : '';
}

/**
 * Whether a 404 that member `name` met may be its scopes' doing, and another member could see
 * more: the answer's `X-Accepted-OAuth-Scopes` (the scopes the endpoint accepts) names none that
 * `name` reports, and one that a live member not in `exclude` reports. GitHub answers 404, not 403,
 * to a token whose scopes do not reach a private resource.
 */
export function anotherSeesMore(
  rows: ReadonlyArray<ScopesRow & { readonly state?: string }>,
  name: string,
  accepted: string | undefined,
  exclude: ReadonlySet<string>,
): boolean {
  if (accepted === undefined) return false;
  const wanted = parseScopes(accepted);
  if (wanted.length === 0) return false;
  const grants = (row: ScopesRow): boolean => row.scopes !== null && row.scopes.some((scope) => wanted.includes(scope));
  const own = rows.find((row) => row.name === name);
  if (own === undefined || own.scopes === null || grants(own)) return false;
  return rows.some((row) => row.name !== name && !exclude.has(row.name) && row.state !== 'dead' && grants(row));
}
