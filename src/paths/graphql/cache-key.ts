/**
 * Pure: the cache key of a pooled GraphQL query. Two requests share an answer only when they ask
 * the same thing of the same upstream with the same credential partition:
 *
 *   upstream, partition, normalised document (graphql's `print` of the parsed query: spacing,
 *   commas and comments do not matter), variables as canonical JSON (object keys sorted at every
 *   level), operation name, and the request headers that select a representation (Accept,
 *   GraphQL-Features, X-GitHub-Api-Version).
 *
 * The key is a SHA-256 digest of those parts, so a 256 KiB document costs 64 characters of key.
 */
import { createHash } from 'node:crypto';
import { print, type DocumentNode } from 'graphql';

export interface GraphqlKeyInput {
  readonly upstream: string;
  /** The credential partition (src/cache/rules/key.ts): the pool's, when its tokens are equivalent. */
  readonly partition: string;
  readonly document: DocumentNode;
  readonly variables: Readonly<Record<string, unknown>> | undefined;
  readonly operationName: string | undefined;
  /** Header values that select the answer, in a fixed order (absent: undefined). */
  readonly selecting: ReadonlyArray<string | undefined>;
}

/** JSON with object keys sorted at every level: equal values, equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item)).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
  return `{${entries.join(',')}}`;
}

export function graphqlCacheKey(input: GraphqlKeyInput): string {
  const parts = [
    input.upstream,
    input.partition,
    print(input.document),
    canonicalJson(input.variables ?? {}),
    input.operationName ?? '',
    ...input.selecting.map((value) => value ?? ''),
  ];
  // Each part is length-prefixed: no two different lists of parts give the same text.
  const text = parts.map((part) => `${part.length}:${part}`).join('\n');
  return `gql:${createHash('sha256').update(text).digest('base64url')}`;
}
