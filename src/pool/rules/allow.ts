/**
 * Pure: a consumer's scope, the `allow` rules of a consumer key or an OIDC issuer. A rule is
 * globs over the GitHub API path (as the upstream sees it below its base path: no `/api/v3`, no
 * route prefix that `strip_prefix` removes) and the methods it allows (GET and HEAD by default).
 *
 *   `*`   one whole segment;  `**`  any number of segments (none included);  else a literal segment.
 *   `${claim}` (OIDC only): a whole segment (or, for `repository`, two) filled from the token.
 *
 * Paths are compared in normal form (src/http/target.ts: lower case, unreserved escapes
 * decoded, no trailing slash). A path with an empty segment, a dot segment or an encoded slash
 * matches nothing (the request target check refuses most of them first). A path that names a
 * repository by id (`/repositories/...`), searches across repositories (`/search/...`) or runs
 * GraphQL (`/graphql`) matches only a glob whose first segment names it literally: `/**` does not
 * reach them.
 */
import { normalPath } from '../../http/target.js';

export { globProblem } from '../../platform/config/path-glob.js';

/** One configured rule, as the schema validated it (src/platform/config/schema.ts `allowRuleSchema`). */
export interface AllowRule {
  readonly paths: readonly string[];
  readonly methods: readonly string[];
}

type Part = { readonly kind: 'literal'; readonly text: string } | { readonly kind: 'one' } | { readonly kind: 'any' };

interface CompiledRule {
  readonly methods: ReadonlySet<string>;
  readonly globs: ReadonlyArray<readonly Part[]>;
}

/** A compiled scope: what `allows` checks. */
export interface Scope {
  readonly rules: readonly CompiledRule[];
}

/** First segments that only a glob naming them literally reaches. */
const EXPLICIT_HEADS: ReadonlySet<string> = new Set(['repositories', 'search', 'graphql']);

function compileGlob(glob: string): Part[] {
  if (glob === '/') return [];
  return glob
    .slice(1)
    .split('/')
    .map((segment): Part =>
      segment === '**' ? { kind: 'any' } : segment === '*' ? { kind: 'one' } : { kind: 'literal', text: segment.toLowerCase() },
    );
}

/** The scope of validated rules without placeholders (a consumer key's). */
export function compileScope(rules: readonly AllowRule[]): Scope {
  return {
    rules: rules.map((rule) => ({
      methods: new Set(rule.methods.map((method) => method.toUpperCase())),
      globs: rule.paths.map(compileGlob),
    })),
  };
}

/** How many segments a claim fills: `repository` is `owner/name`; every other claim one segment. */
const CLAIM_SEGMENTS: Readonly<Record<string, number>> = { repository: 2 };
/** A claim value's segment: letters, digits and . _ - : @ (never `*`, `%`, `..` or an empty one). */
const CLAIM_SEGMENT = /^[A-Za-z0-9._:@-]+$/;

/** A claim's value as path segments, or undefined when it is missing or could widen a glob. */
export function claimSegments(claim: string, value: unknown): string[] | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) return undefined;
  const segments = value.split('/');
  if (segments.length !== (CLAIM_SEGMENTS[claim] ?? 1)) return undefined;
  for (const segment of segments) if (!CLAIM_SEGMENT.test(segment) || /^\.+$/.test(segment)) return undefined;
  return segments;
}

/**
 * Rules with `${claim}` placeholders filled from a verified token's claims, compiled; or the
 * claim whose value is missing or not allowed (a value with `*`, `..`, `%`, or more `/` than the
 * claim's form has).
 */
export function bindScope(rules: readonly AllowRule[], claims: Readonly<Record<string, unknown>>): Scope | { refusedClaim: string } {
  const bound: AllowRule[] = [];
  for (const rule of rules) {
    const paths: string[] = [];
    for (const glob of rule.paths) {
      let refused: string | undefined;
      const filled = glob.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_match, claim: string) => {
        const segments = claimSegments(claim, claims[claim]);
        if (segments === undefined) refused ??= claim;
        return segments?.join('/') ?? '';
      });
      if (refused !== undefined) return { refusedClaim: refused };
      paths.push(filled);
    }
    bound.push({ paths, methods: rule.methods });
  }
  return compileScope(bound);
}

/** Whether a path (as it goes upstream, below the base path) is one that no glob may reach by a trick. */
function pathSegments(pathname: string): string[] | undefined {
  const path = normalPath(pathname);
  if (path === '/') return [];
  if (/%(2f|5c|00)/i.test(path)) return undefined;
  const segments = path.slice(1).split('/');
  for (const segment of segments) if (segment === '' || segment === '.' || segment === '..') return undefined;
  return segments;
}

/** Whether `parts` match `segments` whole: `*` one segment, `**` any number (dynamic programming, no backtracking). */
function globMatches(parts: readonly Part[], segments: readonly string[]): boolean {
  const head = segments[0];
  if (head !== undefined && EXPLICIT_HEADS.has(head)) {
    const first = parts[0];
    if (first === undefined || first.kind !== 'literal' || first.text !== head) return false;
  }
  // reach[j]: the first i segments are matched by the first j parts.
  let reach = new Array<boolean>(parts.length + 1).fill(false);
  reach[0] = true;
  for (let j = 1; j <= parts.length; j++) reach[j] = reach[j - 1]! && parts[j - 1]!.kind === 'any';
  for (const segment of segments) {
    const next = new Array<boolean>(parts.length + 1).fill(false);
    for (let j = 1; j <= parts.length; j++) {
      const part = parts[j - 1]!;
      if (part.kind === 'any') next[j] = reach[j]! || reach[j - 1]! || next[j - 1]!;
      else if (part.kind === 'one') next[j] = reach[j - 1]!;
      else next[j] = reach[j - 1]! && part.text === segment;
    }
    reach = next;
  }
  return reach[parts.length]!;
}

/** Whether the scope allows `method` on `pathname` (the API path, before normalisation). */
export function allows(scope: Scope, method: string, pathname: string): boolean {
  const segments = pathSegments(pathname);
  if (segments === undefined) return false;
  const upper = method.toUpperCase();
  for (const rule of scope.rules) {
    if (!rule.methods.has(upper)) continue;
    for (const parts of rule.globs) if (globMatches(parts, segments)) return true;
  }
  return false;
}
