/**
 * Pure reading of what the upstream says about the token that fetched an answer: the
 * x-ratelimit-* headers, GET /rate_limit's body (every resource), Retry-After, and the verdict of
 * a status (fine, a 401 to confirm, primary limit spent, secondary limit). What the verdict then
 * does to the token's numbers is state.ts's job. Which rate-limit resource a request spends
 * (`resourceOf`) is here too.
 *
 * A 401 on a request is `unauthorized`, not `dead`: GitHub answers 401 to a good token on
 * endpoints that want another kind of credential (App-only ones such as GET /app), so only GET
 * /rate_limit answering 401 for the same token proves it bad (confirm.ts).
 */
import { parseHttpDate } from '../../http/headers/fields.js';
import { graphqlEndpoint, basePrefixOf } from '../../http/route.js';

/** Reads one response header by its lower-case name. */
export type HeaderLookup = (name: string) => string | undefined;

/** What an upstream answer means for the token that was used (`classify` decides). */
export type Verdict =
  | { kind: 'ok' }
  /**
   * 401 on a request: about the request until GET /rate_limit with the token confirms it (an
   * App-only endpoint answers 401 to a good token). Never retried unless confirmed.
   */
  | { kind: 'unauthorized' }
  /** 401 confirmed (GET /rate_limit answered 401 too): the token is bad or revoked. */
  | { kind: 'dead' }
  /** 403/429 with remaining 0: spent until `reset` (epoch seconds, when given). */
  | { kind: 'exhausted'; reset: number | undefined }
  /** 403/429 secondary limit: pause for `retryAfterMs` when given, else the doubling default. */
  | { kind: 'secondary'; retryAfterMs: number | undefined };

/** The x-ratelimit-* set of one answer (or of GET /rate_limit's body). */
export interface RateObservation {
  limit: number;
  remaining: number;
  /** Epoch seconds. */
  reset: number;
  resource: string;
}

/** A 401's kind: `credentials` ("Bad credentials") or `request` (any other: the endpoint wants another credential). */
export type UnauthorizedKind = 'credentials' | 'request';

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
