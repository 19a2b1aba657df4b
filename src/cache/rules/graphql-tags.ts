/**
 * Pure: the tags a GraphQL answer is filed under (tags.ts spells them), so that a webhook delivery
 * or a mutation about what it shows purges it:
 *
 *   from the query's root fields   repository(owner:, name:)  -> repo:owner/name
 *                                  organization(login:), user(login:), repositoryOwner(login:) -> owner:login
 *                                  node(id:), nodes(ids:)     -> node:id
 *     (literal arguments or variables, through root fragments too)
 *   from the answer                every `id` (a global node id)  -> node:id
 *                                  every `nameWithOwner`           -> repo:owner/name
 *     (under the names the query gives them: an alias of `id` counts as `id`)
 *
 * An answer with more than MAX_TAGS tags is not stored: it could not be purged reliably.
 */
import {
  Kind,
  valueFromASTUntyped,
  type DocumentNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
} from 'graphql';
import { fullNameTag, nodeTag, ownerTag, repoTag } from './tags.js';

export const MAX_TAGS = 10_000;

type Variables = Readonly<Record<string, unknown>> | undefined;

const ROOT_OWNERS = new Set(['organization', 'user', 'repositoryOwner']);

/** The value of a literal or a variable argument (a variable's default when the call gives none). */
function valueOf(node: ValueNode | undefined, variables: Variables, operation: OperationDefinitionNode): unknown {
  if (node === undefined) return undefined;
  if (node.kind === Kind.STRING || node.kind === Kind.ENUM) return node.value;
  if (node.kind === Kind.LIST) return node.values.map((item) => valueOf(item, variables, operation));
  if (node.kind !== Kind.VARIABLE) return undefined;
  const name = node.name.value;
  if (variables !== undefined && Object.hasOwn(variables, name)) return variables[name];
  const definition = operation.variableDefinitions?.find((variable) => variable.variable.name.value === name);
  return definition?.defaultValue === undefined ? undefined : valueOf(definition.defaultValue, undefined, operation);
}

function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  const out = new Map<string, FragmentDefinitionNode>();
  for (const node of document.definitions) if (node.kind === Kind.FRAGMENT_DEFINITION) out.set(node.name.value, node);
  return out;
}

/** Tags named by the operation's root fields' arguments. */
export function queryTags(document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): string[] {
  const fragments = fragmentsOf(document);
  const tags = new Set<string>();
  const seen = new Set<string>();
  const add = (tag: string | undefined): void => {
    if (tag !== undefined) tags.add(tag);
  };
  const visit = (set: SelectionSetNode): void => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.INLINE_FRAGMENT) visit(selection.selectionSet);
      else if (selection.kind === Kind.FRAGMENT_SPREAD) {
        const fragment = fragments.get(selection.name.value);
        if (fragment !== undefined && !seen.has(fragment.name.value)) {
          seen.add(fragment.name.value);
          visit(fragment.selectionSet);
        }
      } else {
        const argument = (name: string): unknown =>
          valueOf(selection.arguments?.find((arg) => arg.name.value === name)?.value, variables, operation);
        const field = selection.name.value;
        if (field === 'repository') add(repoTag(argument('owner'), argument('name')));
        else if (ROOT_OWNERS.has(field)) add(ownerTag(argument('login')));
        else if (field === 'node') add(nodeTag(argument('id')));
        else if (field === 'nodes') {
          const ids = argument('ids');
          if (Array.isArray(ids)) for (const id of ids) add(nodeTag(id));
        }
      }
    }
  };
  visit(operation.selectionSet);
  return [...tags];
}

/** The response keys under which `id` and `nameWithOwner` appear anywhere in the document (their aliases included). */
export interface AnswerKeys {
  readonly ids: ReadonlySet<string>;
  readonly names: ReadonlySet<string>;
}

export function answerKeys(document: DocumentNode): AnswerKeys {
  const ids = new Set<string>(['id']);
  const names = new Set<string>(['nameWithOwner']);
  const visit = (set: SelectionSetNode | undefined): void => {
    if (set === undefined) return;
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        if (selection.name.value === 'id') ids.add(key);
        else if (selection.name.value === 'nameWithOwner') names.add(key);
        visit(selection.selectionSet);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) visit(selection.selectionSet);
    }
  };
  for (const definition of document.definitions)
    if (definition.kind === Kind.OPERATION_DEFINITION || definition.kind === Kind.FRAGMENT_DEFINITION) visit(definition.selectionSet);
  return { ids, names };
}

/** Tags of the ids and names an answer's `data` shows; undefined past MAX_TAGS. */
export function answerTags(data: unknown, keys: AnswerKeys): string[] | undefined {
  const tags = new Set<string>();
  const stack: unknown[] = [data];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (const item of value) if (item !== null && typeof item === 'object') stack.push(item);
      continue;
    }
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      if (typeof item === 'string') {
        const tag = keys.ids.has(key) ? nodeTag(item) : keys.names.has(key) ? fullNameTag(item) : undefined;
        if (tag !== undefined) tags.add(tag);
      } else if (item !== null && typeof item === 'object') stack.push(item);
    }
    if (tags.size > MAX_TAGS) return undefined;
  }
  return [...tags];
}

/**
 * The tags of a query and its answer (`data` parsed), or undefined when the answer may not be
 * stored for them (too many).
 */
export function graphqlTags(
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Variables,
  data: unknown,
): string[] | undefined {
  const found = answerTags(data, answerKeys(document));
  if (found === undefined) return undefined;
  const tags = new Set([...queryTags(document, operation, variables), ...found]);
  return tags.size > MAX_TAGS ? undefined : [...tags];
}

/** Input fields that hold node ids: `id`, `starrableId`, `labelIds`, ... (`clientMutationId` is the client's own string). */
const ID_FIELD = /^(?:id|ids|[A-Za-z0-9_]*Ids?)$/;
const NOT_AN_ID = 'clientMutationId';

/** Node tags of the ids a mutation's input names (its root fields' arguments, variables filled in). */
export function inputTags(operation: OperationDefinitionNode, variables: Variables): string[] {
  const tags = new Set<string>();
  const stack: Array<[string, unknown]> = [];
  for (const selection of operation.selectionSet.selections) {
    if (selection.kind !== Kind.FIELD) continue;
    for (const argument of selection.arguments ?? [])
      stack.push([argument.name.value, valueFromASTUntyped(argument.value, variables as Record<string, unknown> | undefined)]);
  }
  while (stack.length > 0 && tags.size <= MAX_TAGS) {
    const [key, value] = stack.pop()!;
    if (typeof value === 'string') {
      const tag = ID_FIELD.test(key) && key !== NOT_AN_ID ? nodeTag(value) : undefined;
      if (tag !== undefined) tags.add(tag);
    } else if (Array.isArray(value)) for (const item of value) stack.push([key, item]);
    else if (value !== null && typeof value === 'object')
      for (const entry of Object.entries(value as Record<string, unknown>)) stack.push(entry);
  }
  return [...tags];
}

/** The tags a mutation purges: the ids of its input and everything its answer's `data` shows (at most MAX_TAGS). */
export function mutationTags(document: DocumentNode, operation: OperationDefinitionNode, variables: Variables, data: unknown): string[] {
  const shown = data === undefined ? [] : (answerTags(data, answerKeys(document)) ?? []);
  return [...new Set([...inputTags(operation, variables), ...shown])].slice(0, MAX_TAGS);
}

/** The `data` of an answer that may be stored: a 200 JSON object with `data` and no `errors` (a partial answer never is). */
export function storableData(status: number, contentType: string | undefined, body: Buffer): { data: unknown } | undefined {
  if (status !== 200 || contentType === undefined || !/^application\/json\b/i.test(contentType.trim())) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const { data, errors } = value as { data?: unknown; errors?: unknown };
  return data === undefined || data === null || errors !== undefined ? undefined : { data };
}
