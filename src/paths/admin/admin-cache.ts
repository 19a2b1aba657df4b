/**
 * The cache on the admin port: purge, inspect, stats.
 *
 *   POST /admin/purge        JSON {"path": "/repos/o/r"} or {"prefix": "/repos/o/"}, optionally
 *                            "upstream": "github": marks every entry in the scope stale, on every
 *                            replica (Redis bus); answers with the entries marked here.
 *                            {"tag": "repo:o/r"} (or owner:LOGIN, node:ID; also ?tag=): drops every
 *                            GraphQL answer and stored 404 filed under the tag, on every replica
 *   GET  /admin/cache?path=/repos/o/r[&upstream=github][&body=1]
 *                            this process's L1 entries for that path (src/cache/rules/inspect.ts): no
 *                            secret ever; bodies only on request and only of anonymous and pool entries
 *   GET  /admin/cache?graphql=KEY
 *                            the GraphQL answer under KEY (its Cache-Status names it), in L1 or L2,
 *                            and the tags it is filed under
 *   GET  /admin/cache/stats[?top=N]
 *                            entries, bytes, and the busiest paths by hits and by upstream spend
 *
 * A cluster primary holds no cache: it hands each call to its workers and combines their answers
 * (`combineAnswers`; src/main/cluster.ts).
 *
 * Paths are the client's (as requested through the proxy, in the cache's keys), matched in the
 * normal form of src/cache/rules/stale-marks.ts (case-insensitive; a trailing slash is dropped, so the
 * prefix "/repos/o/" covers "/repos/o/r" and never "/repos/other").
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { entryView, fetcherOf, keyParts, type EntryView } from '../../cache/rules/inspect.js';
import { normalPath, type PathScope } from '../../cache/rules/stale-marks.js';
import type { Cache } from '../../cache/store/cache.js';
import type { TagStore } from '../../cache/store/tags.js';
import { isTag, normalTag } from '../../cache/rules/tags.js';
import { currentAge } from '../../cache/rules/policy.js';
import { readBody } from '../../http/body.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import type { PathRow } from '../../platform/metrics/quota-windows.js';

export interface CacheAdminDeps {
  readonly cache: Pick<Cache, 'l1' | 'shared' | 'validity'>;
  /** The configured upstream names, in config order. */
  readonly upstreams: readonly string[];
  readonly metrics: Metrics;
  /** Whether marks reach the other replicas (Redis configured). */
  readonly shared: boolean;
  /** Where GraphQL answers and stored 404s are filed by tag. */
  readonly tags?: TagStore | undefined;
}

export interface Answer {
  status: number;
  value: unknown;
  headers?: Record<string, string>;
}

/** Purge bodies are small JSON objects. */
const MAX_PURGE_BODY = 64 * 1024;
/** At most this many entries are listed by one inspection. */
const MAX_LISTED = 1000;
const PATH = /^\/[^\s?#\x00-\x1f\x7f]{0,2047}$/;

/** One call, as the HTTP request gave it (plain data: it also travels to cluster workers). */
export type CacheCall =
  { kind: 'purge'; body: Record<string, unknown> } | { kind: 'inspect'; query: string } | { kind: 'stats'; query: string };

const problem = (status: number, message: string): Answer => ({ status, value: { message } });
const notAllowed = (allow: string): Answer => ({ status: 405, value: { message: `Method not allowed (${allow})` }, headers: { allow } });

/** The admin paths this module serves. */
export function servesCacheAdmin(path: string): boolean {
  return path === '/admin/purge' || path === '/admin/cache' || path === '/admin/cache/stats';
}

/** The call an admin request makes, or the answer to a request that makes none (wrong method, bad body). */
export async function readCacheCall(req: IncomingMessage, path: string): Promise<CacheCall | Answer> {
  const query = new URL(req.url ?? '/', 'http://admin').search;
  if (path !== '/admin/purge') {
    if (req.method !== 'GET' && req.method !== 'HEAD') return notAllowed('GET, HEAD');
    return path === '/admin/cache' ? { kind: 'inspect', query } : { kind: 'stats', query };
  }
  if (req.method !== 'POST') return notAllowed('POST');
  const tag = new URLSearchParams(query).get('tag');
  if (tag !== null && Number(req.headers['content-length'] ?? 0) === 0 && req.headers['transfer-encoding'] === undefined) {
    req.resume();
    return { kind: 'purge', body: { tag } };
  }
  const read = await readBody(req, MAX_PURGE_BODY);
  if (read.kind !== 'read') return problem(read.kind === 'too-large' ? 413 : 400, 'the body must be a small JSON object');
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    return problem(400, 'the body is not valid JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return problem(400, 'the body must be a JSON object');
  return { kind: 'purge', body: body as Record<string, unknown> };
}

const topOf = (query: URLSearchParams): number => Math.min(100, Math.max(1, Number.parseInt(query.get('top') ?? '10', 10) || 10));

/** The GraphQL key form: `gql:` and 43 base64url characters (src/paths/graphql/cache-key.ts). */
const GRAPHQL_KEY = /^gql:[A-Za-z0-9_-]{43}$/;

/** Drops every entry filed under a tag, on every replica. */
async function purgeTag(deps: CacheAdminDeps, body: Record<string, unknown>): Promise<Answer> {
  if (Object.keys(body).length !== 1)
    return problem(400, '"tag" goes alone (no path, prefix or upstream: a tag names entries of every upstream)');
  const tag = body.tag;
  if (typeof tag !== 'string' || !isTag(tag))
    return problem(400, '"tag" must be repo:OWNER/NAME, owner:LOGIN or node:ID (a GraphQL global node id)');
  if (deps.tags === undefined) return problem(404, 'no entry is filed by tag here');
  const purged = await deps.tags.purge([normalTag(tag)]);
  deps.metrics.cachePurges.inc({ scope: 'tag' });
  deps.metrics.cacheTagPurges.inc({ source: 'purge' }, purged);
  return {
    status: 200,
    value: { tag: normalTag(tag), purged, marked: 0, replicas: deps.shared ? 'every replica (Redis)' : 'this process' },
  };
}

/** The GraphQL answer under a key: in this process's L1, else L2, and its tags. */
async function inspectGraphql(deps: CacheAdminDeps, key: string): Promise<Answer> {
  if (!GRAPHQL_KEY.test(key)) return problem(400, 'give ?graphql=KEY, the key="gql:..." of a GraphQL answer\'s Cache-Status');
  let entry = deps.cache.l1?.peek(key);
  let tier = 'L1';
  if (entry === undefined && deps.cache.shared !== undefined) {
    const found = await deps.cache.shared.l2.get(key);
    if (found.kind === 'hit') [entry, tier] = [found.entry, 'L2'];
  }
  const filed = await deps.tags?.filed(key);
  const note = 'GraphQL answers are never shown whole: the key, the tags and the figures are';
  if (entry === undefined) return { status: 200, value: { path: '/graphql', key, entries: [], note } };
  const age = currentAge(entry, Date.now());
  const view = {
    upstream: filed?.about?.upstream ?? null,
    path: '/graphql',
    key,
    operation: filed?.about?.what ?? null,
    partition: filed?.about?.partition ?? null,
    tier,
    status: entry.status,
    age,
    ttl: entry.lifetime - age,
    size: entry.body.length,
    fetched_by: fetcherOf(entry.fetchedBy),
    stored_at: new Date(entry.storedAt).toISOString(),
    tags: filed?.tags ?? [],
  };
  return { status: 200, value: { path: '/graphql', key, entries: [view], note } };
}

export function createCacheAdmin(deps: CacheAdminDeps): (call: CacheCall) => Answer | Promise<Answer> {
  const upstreamsOf = (named: unknown): string[] | Answer => {
    if (named === undefined || named === null) return [...deps.upstreams];
    if (typeof named !== 'string' || !deps.upstreams.includes(named))
      return problem(404, `unknown upstream (configured: ${deps.upstreams.join(', ')})`);
    return [named];
  };

  const purge = (body: Record<string, unknown>): Answer | Promise<Answer> => {
    if (body.tag !== undefined) return purgeTag(deps, body);
    const unknown = Object.keys(body).filter((key) => key !== 'upstream' && key !== 'path' && key !== 'prefix');
    if (unknown.length > 0) return problem(400, `unknown field "${unknown[0]!.slice(0, 40)}" (fields: upstream, path, prefix; or tag)`);
    const prefix = body.prefix !== undefined;
    const given = prefix ? body.prefix : body.path;
    if ((body.path === undefined) === (body.prefix === undefined)) return problem(400, 'give exactly one of "path" and "prefix"');
    if (typeof given !== 'string' || !PATH.test(given))
      return problem(400, `"${prefix ? 'prefix' : 'path'}" must be a path starting with "/", without query`);
    const names = upstreamsOf(body.upstream);
    if (!Array.isArray(names)) return names;
    const path = normalPath(given);
    const scopes: PathScope[] = names.map((upstream) => ({ upstream, path, prefix }));
    const marked = deps.cache.validity.markStale(scopes, 'purge');
    deps.metrics.cachePurges.inc({ scope: prefix ? 'prefix' : 'path' });
    return {
      status: 200,
      value: {
        upstreams: names,
        [prefix ? 'prefix' : 'path']: path,
        marked,
        replicas: deps.shared ? 'every replica (Redis)' : 'this process',
      },
    };
  };

  const inspect = (query: URLSearchParams): Answer | Promise<Answer> => {
    const graphql = query.get('graphql');
    if (graphql !== null) return inspectGraphql(deps, graphql);
    const given = query.get('path');
    if (given === null || !PATH.test(given))
      return problem(400, 'give ?path=/a/path (the path as requested through the proxy, without query)');
    const names = upstreamsOf(query.get('upstream') ?? undefined);
    if (!Array.isArray(names)) return names;
    const withBody = query.get('body') === '1';
    const now = Date.now();
    const entries: EntryView[] = [];
    for (const upstream of names) {
      for (const key of deps.cache.validity.marking.index.keysIn({ upstream, path: normalPath(given), prefix: false })) {
        const entry = deps.cache.l1?.peek(key);
        const parts = keyParts(key);
        if (entry !== undefined && parts !== undefined && entries.length < MAX_LISTED) entries.push(entryView(parts, entry, now, withBody));
      }
    }
    return {
      status: 200,
      value: { path: given, entries, note: "this process's in-memory cache (L1); entries only in Redis are not listed" },
    };
  };

  const stats = (query: URLSearchParams): Answer => {
    const top = topOf(query);
    const { cache, metrics } = deps;
    return {
      status: 200,
      value: {
        entries: cache.l1?.size ?? 0,
        bytes: cache.l1?.bytes ?? 0,
        marked_scopes: cache.validity.marking.scopes,
        top_by_hits: metrics.topPaths.top('hits', top),
        top_by_upstream: metrics.topPaths.top('spent', top),
      },
    };
  };

  return (call) => {
    if (call.kind === 'purge') return purge(call.body);
    const query = new URLSearchParams(call.query);
    return call.kind === 'inspect' ? inspect(query) : stats(query);
  };
}

type Row = PathRow;

/** Sums rows of the same upstream and path, the busiest first (by `key`), at most `count`. */
function mergeRows(lists: readonly Row[][], count: number, key: (row: Row) => number): Row[] {
  const merged = new Map<string, Row>();
  for (const row of lists.flat()) {
    const id = `${row.upstream}\n${row.path}`;
    const known = merged.get(id);
    if (known === undefined) merged.set(id, { ...row });
    else {
      known.hits += row.hits;
      known.upstream_requests += row.upstream_requests;
      known.quota_spent += row.quota_spent;
    }
  }
  return [...merged.values()].sort((left, right) => key(right) - key(left)).slice(0, count);
}

/** One answer from the answers of several processes (a cluster primary's workers) to the same call. */
export function combineAnswers(call: CacheCall, answers: readonly Answer[]): Answer {
  const failed = answers.find((answer) => answer.status !== 200);
  if (failed !== undefined || answers.length === 0) return failed ?? problem(503, 'no worker answered');
  const values = answers.map((answer) => answer.value as Record<string, unknown>);
  const first = values[0]!;
  const sum = (name: string): number => values.reduce((total, value) => total + Number(value[name] ?? 0), 0);
  if (call.kind === 'purge') {
    const replicas = first.replicas === 'this process' ? "this machine's workers" : first.replicas;
    const purged = first.tag === undefined ? {} : { purged: sum('purged') };
    return { status: 200, value: { ...first, marked: sum('marked'), ...purged, replicas, workers: answers.length } };
  }
  if (call.kind === 'inspect') {
    const entries = values.flatMap((value, worker) => (value.entries as object[]).map((entry) => ({ ...entry, worker })));
    return {
      status: 200,
      value: { path: first.path, entries, note: "the workers' in-memory caches (L1); entries only in Redis are not listed" },
    };
  }
  const top = topOf(new URLSearchParams(call.query));
  const rows = (name: string): Row[][] => values.map((value) => value[name] as Row[]);
  return {
    status: 200,
    value: {
      entries: sum('entries'),
      bytes: sum('bytes'),
      marked_scopes: Math.max(...values.map((value) => Number(value.marked_scopes ?? 0))),
      top_by_hits: mergeRows(rows('top_by_hits'), top, (row) => row.hits),
      top_by_upstream: mergeRows(rows('top_by_upstream'), top, (row) => row.quota_spent * 1e9 + row.upstream_requests),
      workers: answers.length,
    },
  };
}

/** Writes an answer of this module. */
export function writeAnswer(res: ServerResponse, answer: Answer, head: boolean): void {
  const body = JSON.stringify(answer.value);
  res.writeHead(answer.status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    ...answer.headers,
  });
  res.end(head ? undefined : body);
}
