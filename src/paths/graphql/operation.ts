/**
 * Pure: what a pooled consumer's GraphQL request is, and whether the pool may run it. The body is
 * GitHub's `{"query", "variables", "operationName"}`; the document is parsed with the reference
 * `graphql` package (within limits.ts's bounds) and the operation picked as GitHub picks it (by
 * `operationName`, else the only one).
 *
 * Pool tokens only read: a mutation or a subscription is refused (403), and so is a document that
 * holds one beside the query it asks for, since the upstream, not the proxy, finally picks the
 * operation it runs. A body that is not such JSON, a document that does not parse, and a missing
 * or unknown operation are refused with 400. Nothing refused reaches the upstream.
 *
 * Introspection (`__schema`, `__type`) is a query like any other and is allowed: it reads GitHub's
 * public schema, no token's data, and costs points like any query.
 */
import { Kind, parse, type DocumentNode, type OperationDefinitionNode } from 'graphql';
import { documentTooBig, MAX_NESTING, MAX_TOKENS, nestsTooDeep } from './limits.js';

/** A query the pool may run: what goes upstream, and the parsed document (for the cache key and the tags). */
export interface PooledQuery {
  readonly kind: 'query';
  readonly query: string;
  readonly variables: Readonly<Record<string, unknown>> | undefined;
  readonly operationName: string | undefined;
  readonly document: DocumentNode;
  /** The operation the upstream runs. */
  readonly operation: OperationDefinitionNode;
}

/**
 * A call made with a client's own credential: a query (cached in its partition), a document that
 * holds a mutation (sent as it is; what it touches is purged after: `mutations`), or anything else
 * (a subscription, a body that does not parse: sent as it is, never cached).
 */
export type ClientCall =
  | PooledQuery
  | {
      readonly kind: 'mutation';
      readonly variables: Readonly<Record<string, unknown>> | undefined;
      readonly document: DocumentNode;
      readonly mutations: readonly OperationDefinitionNode[];
    }
  | { readonly kind: 'other' };

/** Why a request was refused: a bounded set (a metric label). */
export type RefusalReason = 'bad_json' | 'limits' | 'parse' | 'operation' | 'mutation' | 'subscription';

export interface Refusal {
  readonly kind: 'refused';
  readonly status: 400 | 403;
  readonly reason: RefusalReason;
  readonly message: string;
}

function isRefusal(value: object): value is Refusal {
  return (value as { kind?: unknown }).kind === 'refused';
}

const refuse = (status: 400 | 403, reason: RefusalReason, message: string): Refusal => ({ kind: 'refused', status, reason, message });

interface Body {
  query: string;
  variables: Record<string, unknown> | undefined;
  operationName: string | undefined;
}

function bodyOf(text: string): Body | Refusal {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return refuse(400, 'bad_json', 'Problems parsing JSON: the body must be {"query": ..., "variables": ..., "operationName": ...}');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return refuse(400, 'bad_json', 'The body must be a JSON object with a "query" string');
  const { query, variables, operationName } = value as Record<string, unknown>;
  if (typeof query !== 'string' || query.trim() === '') return refuse(400, 'bad_json', 'A "query" string is required');
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables)))
    return refuse(400, 'bad_json', '"variables" must be a JSON object');
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string')
    return refuse(400, 'bad_json', '"operationName" must be a string');
  return {
    query,
    variables: (variables ?? undefined) as Record<string, unknown> | undefined,
    operationName: typeof operationName === 'string' && operationName !== '' ? operationName : undefined,
  };
}

function operationsOf(document: DocumentNode): OperationDefinitionNode[] {
  return document.definitions.filter((node): node is OperationDefinitionNode => node.kind === Kind.OPERATION_DEFINITION);
}

/** The operation GitHub would run: the named one, else the only one. */
function pick(operations: readonly OperationDefinitionNode[], name: string | undefined): OperationDefinitionNode | Refusal {
  if (name !== undefined) {
    const named = operations.find((operation) => operation.name?.value === name);
    return named ?? refuse(400, 'operation', `Unknown operation named "${name.slice(0, 100)}"`);
  }
  if (operations.length === 1) return operations[0]!;
  return operations.length === 0
    ? refuse(400, 'operation', 'The document holds no operation')
    : refuse(400, 'operation', 'Must provide operationName when the document holds several operations');
}

function refusedKind(kind: 'mutation' | 'subscription'): Refusal {
  return refuse(
    403,
    kind,
    `GraphQL ${kind}s are not allowed on the proxy's token pool, which only reads: send your own credential (Authorization) to run one`,
  );
}

/** A body parsed within limits.ts's bounds, or why not. */
function parsedBody(text: string): { body: Body; document: DocumentNode } | Refusal {
  const body = bodyOf(text);
  if (isRefusal(body)) return body;
  if (nestsTooDeep(body.variables)) return refuse(400, 'limits', `The GraphQL variables nest deeper than ${MAX_NESTING} levels`);
  const tooBig = documentTooBig(body.query);
  if (tooBig !== undefined) return refuse(400, 'limits', `The GraphQL document is too large for the proxy: ${tooBig}`);
  try {
    return { body, document: parse(body.query, { maxTokens: MAX_TOKENS, noLocation: true }) };
  } catch (err) {
    return refuse(400, 'parse', `The GraphQL document does not parse: ${(err as Error).message.slice(0, 200)}`);
  }
}

/** A pooled consumer's request body as a query the pool may run, or why not. */
export function pooledQuery(text: string): PooledQuery | Refusal {
  const parsed = parsedBody(text);
  if (isRefusal(parsed)) return parsed;
  const { body, document } = parsed;
  const operations = operationsOf(document);
  const picked = pick(operations, body.operationName);
  if (isRefusal(picked)) return picked;
  if (picked.operation !== 'query') return refusedKind(picked.operation);
  const writer = operations.find((operation) => operation.operation !== 'query');
  if (writer !== undefined) return refusedKind(writer.operation as 'mutation' | 'subscription');
  return { kind: 'query', query: body.query, variables: body.variables, operationName: body.operationName, document, operation: picked };
}

/** What a call with a client's own credential is (nothing is refused: the upstream answers it). */
export function clientCall(text: string): ClientCall {
  const parsed = parsedBody(text);
  if (isRefusal(parsed)) return { kind: 'other' };
  const { body, document } = parsed;
  const operations = operationsOf(document);
  const mutations = operations.filter((operation) => operation.operation === 'mutation');
  if (mutations.length > 0) return { kind: 'mutation', variables: body.variables, document, mutations };
  const picked = pick(operations, body.operationName);
  if (isRefusal(picked) || picked.operation !== 'query' || operations.some((operation) => operation.operation !== 'query'))
    return { kind: 'other' };
  return { kind: 'query', query: body.query, variables: body.variables, operationName: body.operationName, document, operation: picked };
}
