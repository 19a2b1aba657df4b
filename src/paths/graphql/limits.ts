/**
 * Pure: how much GraphQL the proxy reads and parses for a pooled consumer before anything goes
 * upstream. graphql's parser recurses once per nesting level, so a deep document could exhaust
 * the stack before its `maxTokens` limit is reached: the nesting is measured first with graphql's
 * lexer, which does not recurse. The variables are JSON that the proxy serialises again (and
 * canonicalises for the cache key): their nesting is bounded too.
 */
import { Lexer, Source, TokenKind } from 'graphql';

/** Largest request body read from a pooled consumer (larger: 413). */
export const MAX_BODY_BYTES = 256 * 1024;
/** Largest document parsed, in tokens (graphql's `maxTokens` parse option). */
export const MAX_TOKENS = 20_000;
/** Deepest nesting of `{`, `[` and `(` parsed (GitHub's own queries rarely pass 20), and of the variables' JSON. */
export const MAX_NESTING = 100;

const OPENERS: ReadonlySet<TokenKind> = new Set([TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L]);
const CLOSERS: ReadonlySet<TokenKind> = new Set([TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R]);

/**
 * Why a document is too big to parse, or undefined when it is not: more than MAX_NESTING levels
 * or more than MAX_TOKENS tokens. A lexing error is left to the parser, which reports it.
 */
export function documentTooBig(query: string): string | undefined {
  const lexer = new Lexer(new Source(query));
  let depth = 0;
  let tokens = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (++tokens > MAX_TOKENS) return `the document has more than ${MAX_TOKENS} tokens`;
      if (OPENERS.has(token.kind)) depth++;
      else if (CLOSERS.has(token.kind)) depth--;
      if (depth > MAX_NESTING) return `the document nests deeper than ${MAX_NESTING} levels`;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** Whether a JSON value nests deeper than MAX_NESTING levels of objects and arrays (the walk stops there). */
export function nestsTooDeep(value: unknown, depth = 0): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (depth >= MAX_NESTING) return true;
  const children = Array.isArray(value) ? value : Object.values(value);
  return children.some((child) => nestsTooDeep(child, depth + 1));
}
