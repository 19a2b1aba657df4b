/**
 * `POST /graphql`, GitHub's GraphQL API, with the reference `graphql` package: the body is read
 * (at most MAX_BODY bytes), parsed as `{query, variables, operationName}`, the document parsed
 * (at most MAX_TOKENS tokens), validated against graphql-schema.ts, priced (graphql-cost.ts) and
 * executed. The server has already answered a call without credentials (401) and a scripted
 * secondary limit by the time this runs.
 *
 * As on GitHub:
 * - a body that is not JSON is `400 {"message": "Problems parsing JSON"}`; every other answer is a
 *   200 whose body has `data` and/or `errors` (parse and validation errors, NOT_FOUND, pagination);
 * - a call costs its points (at least 1) from the token's `graphql` budget, reported in the
 *   x-ratelimit-* headers with `x-ratelimit-resource: graphql`; a call that does not parse or
 *   validate costs 1;
 * - a call that costs more than what is left is not run: `200 {"errors": [{"type": "RATE_LIMITED",
 *   "message": "API rate limit exceeded for user ID <id>."}]}`, and it spends nothing.
 */
import type { IncomingMessage } from 'node:http';
import {
  executeSync,
  GraphQLError,
  Kind,
  Lexer,
  parse,
  Source,
  TokenKind,
  validate,
  type DocumentNode,
  type ExecutionResult,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
} from 'graphql';
import type { Viewer } from './auth.js';
import type { World } from './data.js';
import { operationCost } from './graphql-cost.js';
import { ROOT, SCHEMA, type GraphqlContext } from './graphql-schema.js';
import { errorJson, type RateView } from './headers.js';
import { spendUnits, type QuotaWindow } from './quota.js';
import { readCappedBody } from './request-body.js';

/** Largest request body read (GitHub does not document one). */
export const MAX_BODY = 1024 * 1024;
/** Largest document parsed, in tokens (graphql's `maxTokens`): bounds the parser's work. */
export const MAX_TOKENS = 20_000;
/** Deepest nesting of `{`, `[` and `(` parsed: graphql's parser recurses, and would run out of stack. */
export const MAX_NESTING = 100;

const GRAPHQL_DOCS_URL = 'https://docs.github.com/graphql';

/** What the server hands over: who calls, and how to answer (server.ts's ApiCall fits). */
export interface GraphqlCall {
  readonly viewer: Viewer | null;
  answer(status: number, body: Buffer, rate: RateView | null, spent: boolean): void;
}

/** One GitHub-shaped GraphQL error: `type` (when GitHub types it) first, then path, locations, message. */
type ErrorJson = Record<string, unknown>;

/** `{"errors": [...]}` (and `data` when given), as GitHub writes it. */
export function graphqlBody(errors: readonly ErrorJson[], data?: unknown): Buffer {
  return Buffer.from(JSON.stringify(data === undefined ? { errors } : { data, errors }));
}

/** A 200 RATE_LIMITED answer (primary or secondary limit) with this message. */
export function rateLimitedBody(message: string): Buffer {
  return graphqlBody([{ type: 'RATE_LIMITED', message }]);
}

/** graphql-js's error as GitHub shapes it: the `type` of `extensions` lifted to the top. */
function errorJsonOf(error: GraphQLError): ErrorJson {
  const { extensions } = error;
  const type = typeof extensions.type === 'string' ? extensions.type : undefined;
  const out: ErrorJson = {};
  if (type !== undefined) out.type = type;
  if (error.path !== undefined) out.path = error.path;
  if (error.locations !== undefined) out.locations = error.locations;
  out.message = error.message;
  const { type: _type, ...rest } = extensions;
  if (Object.keys(rest).length > 0) out.extensions = rest;
  return out;
}

/** Stars given with addStar, per world (a reset makes a new world, and forgets them). */
const starsByWorld = new WeakMap<World, Set<string>>();

function starsOf(world: World): Set<string> {
  let stars = starsByWorld.get(world);
  if (stars === undefined) {
    stars = new Set();
    starsByWorld.set(world, stars);
  }
  return stars;
}

/** A call's request: the query, its variables and the operation to run. */
interface GraphqlRequest {
  query: string;
  variables: Record<string, unknown>;
  operationName: string | undefined;
}

/** The JSON body as a request, or the error message GitHub answers. */
function requestOf(value: unknown): GraphqlRequest | string {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return 'A query attribute must be specified and must be a string.';
  const { query, variables, operationName } = value as Record<string, unknown>;
  if (typeof query !== 'string' || query.trim() === '') return 'A query attribute must be specified and must be a string.';
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables)))
    return 'Variables are invalid JSON.';
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return 'operationName must be a string.';
  return {
    query,
    variables: (variables ?? {}) as Record<string, unknown>,
    operationName: typeof operationName === 'string' && operationName !== '' ? operationName : undefined,
  };
}

/**
 * Whether a document nests deeper than MAX_NESTING, found with graphql's lexer (which does not
 * recurse) before the parser sees it. Stops at MAX_TOKENS; a lexing error is left to the parser.
 */
function nestsTooDeep(query: string): boolean {
  const lexer = new Lexer(new Source(query));
  let depth = 0;
  try {
    for (let token = lexer.advance(), count = 0; token.kind !== TokenKind.EOF && count < MAX_TOKENS; token = lexer.advance(), count++) {
      if (token.kind === TokenKind.BRACE_L || token.kind === TokenKind.BRACKET_L || token.kind === TokenKind.PAREN_L) depth++;
      else if (token.kind === TokenKind.BRACE_R || token.kind === TokenKind.BRACKET_R || token.kind === TokenKind.PAREN_R) depth--;
      if (depth > MAX_NESTING) return true;
    }
  } catch {
    return false;
  }
  return false;
}

/** The operation to run (by name when given), or graphql-js's message about why there is none. */
function pickOperation(document: DocumentNode, name: string | undefined): OperationDefinitionNode | string {
  const operations = document.definitions.filter((node): node is OperationDefinitionNode => node.kind === Kind.OPERATION_DEFINITION);
  if (name !== undefined) return operations.find((op) => op.name?.value === name) ?? `Unknown operation named "${name.slice(0, 100)}".`;
  if (operations.length === 1) return operations[0]!;
  return operations.length === 0 ? 'Must provide an operation.' : 'Must provide operation name if query contains multiple operations.';
}

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const out = new Map<string, FragmentDefinitionNode>();
  for (const node of document.definitions) if (node.kind === Kind.FRAGMENT_DEFINITION) out.set(node.name.value, node);
  return out;
}

/** What a call comes to before quota: a document to run at a cost, or errors to answer (costing 1). */
type Prepared =
  | { kind: 'run'; document: DocumentNode; cost: number; nodeCount: number; request: GraphqlRequest }
  | { kind: 'errors'; errors: ErrorJson[] };

function prepare(text: string): Prepared | 'bad-json' {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'bad-json';
  }
  const request = requestOf(value);
  if (typeof request === 'string') return { kind: 'errors', errors: [{ message: request }] };
  if (nestsTooDeep(request.query)) return { kind: 'errors', errors: [{ message: `Query is nested deeper than ${MAX_NESTING} levels.` }] };
  let document: DocumentNode;
  try {
    document = parse(request.query, { maxTokens: MAX_TOKENS, noLocation: false });
  } catch (err) {
    return { kind: 'errors', errors: [err instanceof GraphQLError ? errorJsonOf(err) : { message: 'Parse error' }] };
  }
  const invalid = validate(SCHEMA, document, undefined, { maxErrors: 25 });
  if (invalid.length > 0) return { kind: 'errors', errors: invalid.map(errorJsonOf) };
  const operation = pickOperation(document, request.operationName);
  if (typeof operation === 'string') return { kind: 'errors', errors: [{ message: operation }] };
  if (!SCHEMA.getRootType(operation.operation))
    return { kind: 'errors', errors: [{ message: `Schema is not configured to execute ${operation.operation} operation.` }] };
  const priced = operationCost(SCHEMA, operation, fragmentsOf(document), request.variables);
  if (!priced.ok) return { kind: 'errors', errors: [{ type: priced.type, message: priced.message }] };
  return { kind: 'run', document, cost: priced.cost, nodeCount: priced.nodeCount, request };
}

/** The body of an executed call: `data` (when execution started) and `errors` (when any). */
function resultBody(result: ExecutionResult): Buffer {
  const out: Record<string, unknown> = {};
  if (result.data !== undefined) out.data = result.data;
  if (result.errors !== undefined && result.errors.length > 0) out.errors = result.errors.map(errorJsonOf);
  return Buffer.from(JSON.stringify(out));
}

/** Answers POST /graphql for a caller with valid credentials (`window`: the token's graphql budget). */
export function answerGraphql(
  world: World,
  req: IncomingMessage,
  call: GraphqlCall,
  window: QuotaWindow,
  base: string,
  onStar?: GraphqlContext['onStar'],
): void {
  const viewer = call.viewer;
  if (viewer === null) throw new Error('answerGraphql needs credentials'); // the server answers 401 first
  readCappedBody(req, MAX_BODY)
    .then((read) => {
      if (read.kind !== 'ok') {
        const status = read.kind === 'too-large' ? 413 : 400;
        call.answer(
          status,
          errorJson(read.kind === 'too-large' ? 'Request body too large' : 'Problems reading the body', GRAPHQL_DOCS_URL),
          window,
          false,
        );
        return;
      }
      const prepared = prepare(read.text);
      if (prepared === 'bad-json') {
        call.answer(400, errorJson('Problems parsing JSON', GRAPHQL_DOCS_URL), window, false);
        return;
      }
      const cost = prepared.kind === 'run' ? prepared.cost : 1;
      if (cost > window.limit - window.used) {
        const who = world.account(viewer.login)?.id ?? 0;
        call.answer(200, rateLimitedBody(`API rate limit exceeded for user ID ${who}.`), window, false);
        return;
      }
      const spent = spendUnits(window, cost);
      if (prepared.kind === 'errors') {
        call.answer(200, graphqlBody(prepared.errors), window, spent);
        return;
      }
      const context: GraphqlContext = { world, viewer, base, cost, nodeCount: prepared.nodeCount, window, stars: starsOf(world), onStar };
      const result = executeSync({
        schema: SCHEMA,
        document: prepared.document,
        rootValue: ROOT,
        contextValue: context,
        variableValues: prepared.request.variables,
        operationName: prepared.request.operationName,
      });
      call.answer(200, resultBody(result), window, spent);
    })
    .catch(() => call.answer(500, errorJson('Server Error'), null, false));
}
