/**
 * Pure: the point cost of a GraphQL operation, by GitHub's documented rule, and its pagination
 * limits ("Rate limits and query limits for the GraphQL API"):
 *
 * - every connection (a field whose type is a `...Connection`) must say `first` (1-100), else the
 *   whole call fails with MISSING_PAGINATION_BOUNDARIES or EXCESSIVE_PAGINATION;
 * - each connection needs one request per parent node it can hang under: a top-level connection 1,
 *   one under `repositories(first: 50)` 50, and so on (every page assumed full);
 * - the cost is the sum of those requests divided by 100, rounded to the nearest whole number, and
 *   at least 1. `nodeCount` is the number of nodes the call may return (for rateLimit.nodeCount);
 *   over 500,000 the call fails with MAX_NODE_LIMIT_EXCEEDED.
 *
 * Fragments (named and inline) count where they are spread. The document has been validated
 * against the schema before (so fragment cycles cannot occur).
 */
import {
  getNamedType,
  GraphQLInt,
  isInterfaceType,
  isObjectType,
  Kind,
  valueFromAST,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLInterfaceType,
  type GraphQLObjectType,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

/** GitHub's bounds of `first` on any connection. */
export const MAX_PAGE = 100;
/** GitHub's bound of the nodes one call may request. */
export const MAX_NODES = 500_000;

export type CostResult =
  | { ok: true; cost: number; nodeCount: number; requests: number }
  | { ok: false; type: 'MISSING_PAGINATION_BOUNDARIES' | 'EXCESSIVE_PAGINATION' | 'MAX_NODE_LIMIT_EXCEEDED'; message: string };

interface Walk {
  readonly schema: GraphQLSchema;
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  readonly variables: Readonly<Record<string, unknown>>;
  requests: number;
  nodes: number;
  failure: Extract<CostResult, { ok: false }> | undefined;
}

type Composite = GraphQLObjectType | GraphQLInterfaceType;

/** `first` of a connection field, with variables applied; undefined when absent or null. */
function pageSize(field: FieldNode, variables: Readonly<Record<string, unknown>>): number | undefined {
  const argument = field.arguments?.find((arg) => arg.name.value === 'first');
  if (argument === undefined) return undefined;
  const value: unknown = valueFromAST(argument.value, GraphQLInt, variables as Record<string, unknown>);
  return typeof value === 'number' ? value : undefined;
}

function visitField(walk: Walk, parent: Composite, field: FieldNode, multiplier: number): void {
  const definition = parent.getFields()[field.name.value];
  if (definition === undefined) return; // __typename and other meta fields
  const named = getNamedType(definition.type);
  let inner = multiplier;
  if (named.name.endsWith('Connection')) {
    const size = pageSize(field, walk.variables);
    if (size === undefined) {
      walk.failure ??= {
        ok: false,
        type: 'MISSING_PAGINATION_BOUNDARIES',
        message: `You must provide a \`first\` or \`last\` value to properly paginate the \`${field.name.value}\` connection.`,
      };
      return;
    }
    if (size < 1 || size > MAX_PAGE) {
      walk.failure ??= {
        ok: false,
        type: 'EXCESSIVE_PAGINATION',
        message: `Requesting ${size} records on the \`${field.name.value}\` connection exceeds the \`first\` limit of ${MAX_PAGE} records.`,
      };
      return;
    }
    walk.requests += multiplier;
    walk.nodes += multiplier * size;
    inner = multiplier * size;
    if (walk.nodes > MAX_NODES) {
      walk.failure ??= {
        ok: false,
        type: 'MAX_NODE_LIMIT_EXCEEDED',
        message:
          `By the time this query traverses to the ${field.name.value} connection, it is requesting up to ` +
          `${walk.nodes.toLocaleString('en-US')} possible nodes which exceeds the maximum limit of 500,000.`,
      };
      return;
    }
  }
  if (field.selectionSet !== undefined && (isObjectType(named) || isInterfaceType(named))) visitSet(walk, named, field.selectionSet, inner);
}

function visitSet(walk: Walk, parent: Composite, set: SelectionSetNode, multiplier: number): void {
  for (const selection of set.selections) {
    if (walk.failure !== undefined) return;
    if (selection.kind === Kind.FIELD) {
      visitField(walk, parent, selection, multiplier);
      continue;
    }
    const fragment = selection.kind === Kind.FRAGMENT_SPREAD ? walk.fragments.get(selection.name.value) : selection;
    if (fragment === undefined) continue;
    const condition = fragment.typeCondition === undefined ? parent : walk.schema.getType(fragment.typeCondition.name.value);
    if (isObjectType(condition) || isInterfaceType(condition)) visitSet(walk, condition, fragment.selectionSet, multiplier);
  }
}

/** The cost of `operation` (its root type's selection set) under `variables`. */
export function operationCost(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  variables: Readonly<Record<string, unknown>>,
): CostResult {
  const root = schema.getRootType(operation.operation);
  const walk: Walk = { schema, fragments, variables, requests: 0, nodes: 0, failure: undefined };
  if (root !== undefined && root !== null) visitSet(walk, root, operation.selectionSet, 1);
  if (walk.failure !== undefined) return walk.failure;
  return { ok: true, cost: Math.max(1, Math.round(walk.requests / 100)), nodeCount: walk.nodes, requests: walk.requests };
}
