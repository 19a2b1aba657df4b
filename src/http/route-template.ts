/**
 * Route templates for metric labels: a request path becomes the template it matches, such as
 * `/repos/:owner/:repo`, never the raw path, so label sets stay bounded whatever clients send.
 * A template is a path whose `:name` segments match any one segment; a final `*` matches the
 * rest. Paths that match no template are labelled `other`. Pure. Matches are memoised in a memo
 * bounded in bytes (src/platform/memo.ts), counted in etagere_cache_bytes{tier="route_memo"}.
 */
import { createBoundedMemo } from '../platform/memo.js';

/**
 * GitHub REST read endpoints (the ones a caching proxy sees most). Other upstreams declare their
 * own templates in the config (`upstreams[].routes`), tried before these.
 */
export const DEFAULT_ROUTES: readonly string[] = [
  '/',
  '/graphql',
  '/rate_limit',
  '/zen',
  '/meta',
  '/user',
  '/user/repos',
  '/user/orgs',
  '/users/:username',
  '/users/:username/repos',
  '/users/:username/orgs',
  '/users/:username/followers',
  '/users/:username/following',
  '/orgs/:org',
  '/orgs/:org/repos',
  '/orgs/:org/members',
  '/repos/:owner/:repo',
  '/repos/:owner/:repo/branches',
  '/repos/:owner/:repo/branches/:branch',
  '/repos/:owner/:repo/commits',
  '/repos/:owner/:repo/commits/:ref',
  '/repos/:owner/:repo/commits/:ref/status',
  '/repos/:owner/:repo/commits/:ref/check-runs',
  '/repos/:owner/:repo/contents/*',
  '/repos/:owner/:repo/contributors',
  '/repos/:owner/:repo/git/*',
  '/repos/:owner/:repo/issues',
  '/repos/:owner/:repo/issues/:number',
  '/repos/:owner/:repo/issues/:number/comments',
  '/repos/:owner/:repo/labels',
  '/repos/:owner/:repo/languages',
  '/repos/:owner/:repo/pulls',
  '/repos/:owner/:repo/pulls/:number',
  '/repos/:owner/:repo/pulls/:number/files',
  '/repos/:owner/:repo/pulls/:number/reviews',
  '/repos/:owner/:repo/releases',
  '/repos/:owner/:repo/releases/latest',
  '/repos/:owner/:repo/releases/:id',
  '/repos/:owner/:repo/tags',
  '/repos/:owner/:repo/topics',
  '/search/:kind',
];

export const OTHER = 'other';

interface Node {
  literal: Map<string, Node>;
  param: Node | undefined;
  /** Template ending here. */
  end: string | undefined;
  /** Template ending with `*` here. */
  rest: string | undefined;
}

const node = (): Node => ({ literal: new Map(), param: undefined, end: undefined, rest: undefined });

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

export function createRouteMatcher(templates: readonly string[]): RouteMatcher {
  const root = node();
  for (const template of templates) {
    const segments = template.split('/').filter((s) => s.length > 0);
    let at = root;
    for (let index = 0; index < segments.length; index++) {
      const seg = segments[index]!;
      const last = index === segments.length - 1;
      if (seg === '*' && last) {
        at.rest ??= template;
        break;
      }
      at = seg.startsWith(':') ? (at.param ??= node()) : (at.literal.get(seg) ?? at.literal.set(seg, node()).get(seg)!);
      if (last) at.end ??= template;
    }
    if (segments.length === 0) root.end ??= template;
  }
  const walk = (at: Node, segs: readonly string[], index: number): string | undefined => {
    if (index === segs.length) return at.end ?? at.rest;
    const seg = segs[index]!;
    const lit = at.literal.get(seg);
    const viaLiteral = lit === undefined ? undefined : walk(lit, segs, index + 1);
    if (viaLiteral !== undefined) return viaLiteral;
    const viaParam = at.param === undefined ? undefined : walk(at.param, segs, index + 1);
    return viaParam ?? at.rest;
  };
  const memo = createBoundedMemo(ROUTE_MEMO_BYTES, ROUTE_MEMO_KEY_CHARS);
  return {
    match(pathname) {
      let template = memo.get(pathname);
      if (template !== undefined) return template;
      const segs = pathname.split('/').filter((s) => s.length > 0);
      template = walk(root, segs, 0) ?? OTHER;
      memo.set(pathname, template);
      return template;
    },
    get memoBytes() {
      return memo.bytes;
    },
  };
}
