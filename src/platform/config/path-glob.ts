/**
 * Pure: what a consumer scope's path glob may look like (src/pool/rules/allow.ts compiles and
 * matches them). The config schema refuses any other glob, naming the key.
 */

/** The longest glob, in segments (matching is segments × parts). */
export const MAX_GLOB_SEGMENTS = 32;

/** A glob's literal segment: what GitHub's path segments are made of (no `%`, no `*` inside). */
const LITERAL_SEGMENT = /^[A-Za-z0-9._~@:+=,-]+$/;
const PLACEHOLDER = /^\$\{([A-Za-z_][A-Za-z0-9_]{0,63})\}$/;

/**
 * Why a configured glob is not one (the schema names the key), or undefined when it is.
 * `placeholders`: whether `${claim}` segments are allowed (OIDC issuers' rules).
 */
export function globProblem(glob: string, placeholders: boolean): string | undefined {
  if (!glob.startsWith('/')) return 'must start with "/"';
  if (glob === '/') return undefined;
  const segments = glob.slice(1).split('/');
  if (segments.length > MAX_GLOB_SEGMENTS) return `has more than ${MAX_GLOB_SEGMENTS} segments`;
  for (const segment of segments) {
    if (segment === '') return 'has an empty segment (a "//" or a trailing "/")';
    if (segment === '*' || segment === '**') continue;
    if (segment === '.' || segment === '..') return 'has a dot segment';
    if (PLACEHOLDER.test(segment)) {
      if (!placeholders) return "has a ${claim} placeholder, which only OIDC issuers' rules may use";
      continue;
    }
    if (segment.includes('*')) return `has "${segment}": "*" and "**" must be whole segments`;
    if (!LITERAL_SEGMENT.test(segment)) return `has "${segment}": only letters, digits and . _ ~ @ : + = , - in a literal segment`;
  }
  return undefined;
}
