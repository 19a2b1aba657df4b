/**
 * Route templates for metric labels: a request path becomes the template it matches, such as
 * `/repos/:owner/:repo`, never the raw path, so label sets stay bounded whatever clients send.
 * A template is a path whose `:name` segments match any one segment; a final `*` matches the
 * rest. Paths that match no template are labelled `other`. Pure.
 */

/** GitHub REST read endpoints (the ones a caching proxy sees most), plus the cyclist service. */
export const DEFAULT_ROUTES: readonly string[] = [
  '/',
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
  '/bicyclists/:city',
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
}

export function createRouteMatcher(templates: readonly string[]): RouteMatcher {
  const root = node();
  for (const t of templates) {
    const segments = t.split('/').filter((s) => s.length > 0);
    let n = root;
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i]!;
      if (seg === '*' && i === segments.length - 1) {
        n.rest ??= t;
        break;
      }
      const next = seg.startsWith(':') ? (n.param ??= node()) : n.literal.get(seg) ?? n.literal.set(seg, node()).get(seg)!;
      n = next;
      if (i === segments.length - 1) n.end ??= t;
    }
    if (segments.length === 0) root.end ??= t;
  }
  const walk = (n: Node, segs: readonly string[], i: number): string | undefined => {
    if (i === segs.length) return n.end ?? n.rest;
    const seg = segs[i]!;
    const lit = n.literal.get(seg);
    const viaLiteral = lit === undefined ? undefined : walk(lit, segs, i + 1);
    if (viaLiteral !== undefined) return viaLiteral;
    const viaParam = n.param === undefined ? undefined : walk(n.param, segs, i + 1);
    return viaParam ?? n.rest;
  };
  const memo = new Map<string, string>();
  return {
    match(pathname) {
      let r = memo.get(pathname);
      if (r !== undefined) return r;
      const segs = pathname.split('/').filter((s) => s.length > 0);
      r = walk(root, segs, 0) ?? OTHER;
      if (memo.size >= 10_000) memo.clear();
      memo.set(pathname, r);
      return r;
    },
  };
}
