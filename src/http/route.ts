/**
 * Pure routing: which upstream serves a request path, which path is sent upstream, the route
 * template a path is labelled with in metrics, and where GraphQL is under an upstream's base.
 * The longest configured prefix wins; a prefix matches whole path segments only
 * ("/bicyclists" matches "/bicyclists" and "/bicyclists/x", never "/bicyclistsx").
 */
import type { UpstreamConfig } from '../platform/config/schema.js';
import { createBoundedMemo } from '../platform/bytes.js';
import { GITHUB_GET_ROUTES, GITHUB_MULTI_SEGMENT } from './github-routes.js';

/** "" for "/", else the path without its trailing slash: what upstream paths are appended to. */
export function basePrefixOf(basePath: string): string {
  return basePath === '/' ? '' : basePath.replace(/\/$/, '');
}

export interface Route {
  readonly upstream: UpstreamConfig;
  /** Index of the upstream in config order (stable id for per-upstream resources). */
  readonly index: number;
}

export interface Router {
  match(pathname: string): Route | undefined;
}

export function createRouter(upstreams: readonly UpstreamConfig[]): Router {
  const routes = upstreams
    .map((upstream, index) => ({ upstream, index }))
    .sort((a, b) => b.upstream.prefix.length - a.upstream.prefix.length);
  return {
    match(pathname) {
      for (const route of routes) {
        const prefix = route.upstream.prefix;
        if (prefix === '/') return route;
        if (pathname.startsWith(prefix) && (pathname.length === prefix.length || pathname.charCodeAt(prefix.length) === 47) /* / */) {
          return route;
        }
      }
      return undefined;
    },
  };
}

/**
 * The path (with query) to request upstream: the upstream URL's own base path, then the client's
 * path with the prefix removed when `strip_prefix` is set.
 */
export function upstreamPath(upstream: UpstreamConfig, basePath: string, pathname: string, search: string): string {
  return basePrefixOf(basePath) + apiPathname(upstream, pathname) + search;
}

/**
 * The client's path as the upstream's API sees it below its base path: without the prefix when
 * `strip_prefix` is set. Route templates (metric labels) are matched against it, so
 * `/ghe/repos/o/r` on a `/ghe` route that strips its prefix is `/repos/{owner}/{repo}`.
 */
export function apiPathname(upstream: UpstreamConfig, pathname: string): string {
  if (!upstream.strip_prefix || upstream.prefix === '/') return pathname;
  const rest = pathname.slice(upstream.prefix.length);
  return rest === '' ? '/' : rest;
}

/** Where GitHub Enterprise Server serves its REST API: clients in Enterprise mode (gh with GH_HOST) put it in front of every path. */
export const ENTERPRISE_REST_BASE = '/api/v3';

/**
 * A client path in GitHub Enterprise Server's layout as the same request in github.com's:
 * `/api/v3/repos/o/r` is `/repos/o/r`, `/api/v3` is `/`, `/api/graphql` is `/graphql`; undefined
 * for any other path (and for `/api/v3//x`, which would not be a path once stripped).
 */
export function enterpriseForm(pathname: string): string | undefined {
  if (pathname === '/api/graphql') return '/graphql';
  if (pathname === ENTERPRISE_REST_BASE || pathname === `${ENTERPRISE_REST_BASE}/`) return '/';
  if (!pathname.startsWith(`${ENTERPRISE_REST_BASE}/`) || pathname.charCodeAt(ENTERPRISE_REST_BASE.length + 1) === 47 /* / */)
    return undefined;
  return pathname.slice(ENTERPRISE_REST_BASE.length);
}

/**
 * Whether an upstream also answers the Enterprise forms of its paths: a GitHub upstream (the token
 * pool, or api.github.com) on the root route. An upstream configured at `/api/v3` or `/api` wins
 * those paths by its longer prefix, and keeps them.
 */
export function servesEnterpriseForms(upstream: UpstreamConfig): boolean {
  if (upstream.prefix !== '/') return false;
  return upstream.token_pool || new URL(upstream.url).hostname.toLowerCase() === 'api.github.com';
}

/*
 * Route templates for metric labels: a request path becomes the template it matches, such as
 * `/repos/{owner}/{repo}`, never the raw path, so label sets stay bounded whatever clients send.
 * The built-in templates are GitHub's GET paths (src/http/github-routes.ts, generated from GitHub's
 * REST API description), in GitHub's spelling. A template's `{name}` or `:name` segment matches any
 * one segment (GitHub's multi-segment parameters, such as a file's `{path}`, one or more); a final
 * `*` matches the rest. An upstream's own templates (`upstreams[].routes`) are tried first, and
 * labelled in GitHub's spelling too (`/bicyclists/:city` is `/bicyclists/{city}`). Paths
 * that match no template, or have an empty segment, are labelled `other`. Matches are memoised
 * in a memo bounded in bytes (src/platform/bytes.ts), counted in etagere_cache_bytes{tier="route_memo"}.
 */
/** GitHub's GET paths, and its GraphQL endpoint (a POST, not in the REST description). */
export const DEFAULT_ROUTES: readonly string[] = [...GITHUB_GET_ROUTES, '/graphql'];

export const OTHER = 'other';

interface Node {
  literal: Map<string, Node>;
  /** One segment. */
  param: Node | undefined;
  /** One or more segments. */
  multi: Node | undefined;
  /** Template ending here. */
  end: string | undefined;
  /** Template ending with `*` here. */
  rest: string | undefined;
}

const node = (): Node => ({ literal: new Map(), param: undefined, multi: undefined, end: undefined, rest: undefined });

const isParam = (segment: string): boolean => segment.startsWith(':') || (segment.startsWith('{') && segment.endsWith('}'));

/** A template in GitHub's spelling: each `:name` segment written `{name}`. */
export function bracedTemplate(template: string): string {
  return template.replace(/(?<=\/):([^/]+)/g, '{$1}');
}

/** A trie of `templates`; the first of two templates of the same shape wins. */
function buildTrie(templates: readonly string[], multiSegment: Readonly<Record<string, string>>): Node {
  const root = node();
  for (const template of templates) {
    const segments = template.split('/').filter((s) => s.length > 0);
    const multi = Object.hasOwn(multiSegment, template) ? `{${multiSegment[template]}}` : undefined;
    let at = root;
    for (let index = 0; index < segments.length; index++) {
      const seg = segments[index]!;
      const last = index === segments.length - 1;
      if (seg === '*' && last) {
        at.rest ??= template;
        break;
      }
      if (seg === multi) at = at.multi ??= node();
      else if (isParam(seg)) at = at.param ??= node();
      else at = at.literal.get(seg) ?? at.literal.set(seg, node()).get(seg)!;
      if (last) at.end ??= template;
    }
    if (segments.length === 0) root.end ??= template;
  }
  return root;
}

/**
 * The template `segs` match below `at`: a literal segment before a parameter, one segment before
 * several. A multi-segment parameter tries each end in turn; what follows it in GitHub's templates
 * is a few literal segments, so a path's walk stays linear in its segments.
 */
function walk(at: Node, segs: readonly string[], index: number): string | undefined {
  if (index === segs.length) return at.end ?? at.rest;
  const lit = at.literal.get(segs[index]!);
  const viaLiteral = lit === undefined ? undefined : walk(lit, segs, index + 1);
  if (viaLiteral !== undefined) return viaLiteral;
  const viaParam = at.param === undefined ? undefined : walk(at.param, segs, index + 1);
  if (viaParam !== undefined) return viaParam;
  if (at.multi !== undefined)
    for (let next = index + 1; next <= segs.length; next++) {
      const viaMulti = walk(at.multi, segs, next);
      if (viaMulti !== undefined) return viaMulti;
    }
  return at.rest;
}

/** The segments of `pathname` (a final `/` ignored), or undefined when one is empty. */
function segmentsOf(pathname: string): string[] | undefined {
  if (pathname === '/') return [];
  if (pathname.charCodeAt(0) !== 47 /* / */) return undefined;
  const end = pathname.charCodeAt(pathname.length - 1) === 47 ? pathname.length - 1 : pathname.length;
  const segs = pathname.slice(1, end).split('/');
  return segs.includes('') ? undefined : segs;
}

export interface RouteMatcher {
  /** The template `pathname` matches, or `other`. */
  match(pathname: string): string;
  /** Bytes the path -> template memo holds (bounded by ROUTE_MEMO_BYTES). */
  readonly memoBytes: number;
}

/** Bound of one matcher's path -> template memo; a walk is about 0.6 µs, a memo hit 0.1 µs. */
export const ROUTE_MEMO_BYTES = 2 * 1024 * 1024;
/** Longer paths are walked every time rather than kept. */
const ROUTE_MEMO_KEY_CHARS = 1024;

/** A matcher of `own` templates (an upstream's `routes`), then of `builtIn` ones (GitHub's). */
export function createRouteMatcher(own: readonly string[], builtIn: readonly string[] = DEFAULT_ROUTES): RouteMatcher {
  const ownRoot = buildTrie(own.map(bracedTemplate), {});
  const builtInRoot = buildTrie(builtIn, GITHUB_MULTI_SEGMENT);
  const memo = createBoundedMemo(ROUTE_MEMO_BYTES, ROUTE_MEMO_KEY_CHARS);
  return {
    match(pathname) {
      let template = memo.get(pathname);
      if (template !== undefined) return template;
      const segs = segmentsOf(pathname);
      template = segs === undefined ? OTHER : (walk(ownRoot, segs, 0) ?? walk(builtInRoot, segs, 0) ?? OTHER);
      memo.set(pathname, template);
      return template;
    },
    get memoBytes() {
      return memo.bytes;
    },
  };
}

/*
 * Where GitHub's GraphQL endpoint is, under an upstream's base path. On GitHub.com the REST
 * base is `/` and GraphQL is `POST /graphql`; on GitHub Enterprise Server the REST base is
 * `/api/v3` and GraphQL is `POST /api/graphql` (one level up, not `/api/v3/graphql`).
 *
 * Clients ask the proxy for `<route>/graphql` (Octokit with the proxy as its base URL does), which
 * routing turns into `<base>/graphql`; that path is sent to `graphqlEndpoint(base)`.
 */
const ENTERPRISE_REST = /\/v3$/;

/** The GraphQL endpoint's upstream path for a REST base path: `/graphql`, `/api/graphql` under `/api/v3`. */
export function graphqlEndpoint(basePath: string): string {
  const prefix = basePrefixOf(basePath);
  return `${prefix.replace(ENTERPRISE_REST, '')}/graphql`;
}

/** The upstream path (without its query) a client's `<route>/graphql` becomes: `<base>/graphql`. */
export function graphqlRequestPath(basePath: string): string {
  return `${basePrefixOf(basePath)}/graphql`;
}

/** `path` without its query string. */
export function withoutQuery(path: string): string {
  const query = path.indexOf('?');
  return query === -1 ? path : path.slice(0, query);
}
