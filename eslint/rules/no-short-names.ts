/**
 * Local ESLint rule `local/no-short-names`: a name must say what it holds, so a one-letter name is
 * reported where it is declared, except in a tiny lambda.
 *
 * No stock rule says this (`id-length` has no lambda exception), hence this one. It walks the
 * scope manager's variables, so every kind of declaration is covered the same way: variables,
 * destructured names, functions, parameters (also those of function types and method signatures),
 * catch parameters, classes, type aliases, interfaces and enums.
 *
 * Allowed:
 * - a parameter of a tiny lambda: an arrow function whose body is a single expression and which
 *   sits on one line, e.g. `items.map((x) => x.id)` or `sort((a, b) => a - b)`;
 * - `i`, `j` and `k` declared in the head of a counting `for (...; ...; ...)` loop (not `for...of`);
 * - `_` as a placeholder for a value that is deliberately unused;
 * - type parameters (`<T>`), and imported names (they are chosen by the module that exports them).
 */
import type { Rule, Scope } from 'eslint';

/** Loop counters allowed in the head of a counting `for` statement. */
const LOOP_COUNTERS: ReadonlySet<string> = new Set(['i', 'j', 'k']);
/** Placeholders for values that are deliberately unused. */
const PLACEHOLDERS: ReadonlySet<string> = new Set(['_']);
/** Definition kinds that are not reported: imports, and assignments to undeclared globals (not declarations). */
const EXEMPT_KINDS: ReadonlySet<string> = new Set(['ImportBinding', 'ImplicitGlobalVariable']);
/**
 * typescript-eslint's scope manager declares a type parameter (`<T>`, `infer U`, and the `K` of
 * `[K in keyof T]`) as a `Type` definition of one of these nodes. ESLint's own types do not know
 * these kinds, hence the comparisons as strings.
 */
const TYPE_PARAMETER_NODES: ReadonlySet<string> = new Set(['TSTypeParameter', 'TSMappedType']);

/** The names the rule looks at: one character long (a single UTF-16 unit or astral symbol). */
function isOneLetter(name: string): boolean {
  return [...name].length === 1;
}

/** What declares a parameter: a function, or (with typescript-eslint) a function type or signature. */
type ParameterOwner = Extract<Scope.Definition, { type: 'Parameter' }>['node'];

/**
 * An arrow function with an expression body that starts and ends on the same line. (With
 * typescript-eslint the owner may also be a function type or a method signature: never tiny.)
 */
function isTinyLambda(owner: ParameterOwner): boolean {
  if (owner.type !== 'ArrowFunctionExpression' || owner.body.type === 'BlockStatement') return false;
  return owner.loc !== null && owner.loc !== undefined && owner.loc.start.line === owner.loc.end.line;
}

/** A type parameter: `<T>`, `infer U`, or the key of a mapped type. */
function isTypeParameter(definition: Scope.Definition): boolean {
  const kind: string = definition.type;
  const node: { type: string } = definition.node;
  return kind === 'Type' && TYPE_PARAMETER_NODES.has(node.type);
}

/** `i`, `j` or `k` declared in the head of a counting loop: `for (let i = 0; ...; ...)`. */
function isLoopCounter(variable: Scope.Variable, definition: Scope.Definition): boolean {
  if (!LOOP_COUNTERS.has(variable.name) || definition.type !== 'Variable') return false;
  // ESLint gives every node its parent; ESTree's types (which Scope.Definition uses) do not say so.
  const statement = (definition.parent as Rule.Node).parent;
  return statement !== null && statement.type === 'ForStatement' && statement.init === definition.parent;
}

/** Whether this declaration of a one-letter name is one of the allowed cases. */
function isAllowed(variable: Scope.Variable, definition: Scope.Definition): boolean {
  if (EXEMPT_KINDS.has(definition.type) || isTypeParameter(definition)) return true;
  if (definition.type === 'Parameter' && isTinyLambda(definition.node)) return true;
  return isLoopCounter(variable, definition);
}

/** Every scope of the file, in no particular order. */
function allScopes(root: Scope.Scope): Scope.Scope[] {
  const scopes: Scope.Scope[] = [];
  const pending: Scope.Scope[] = [root];
  while (pending.length > 0) {
    const scope = pending.pop()!;
    scopes.push(scope);
    pending.push(...scope.childScopes);
  }
  return scopes;
}

const rule: Rule.RuleModule = {
  meta: {
    type: 'suggestion',
    docs: {
      description: 'Disallow one-letter names outside tiny lambdas (one-line arrow functions with an expression body)',
    },
    messages: {
      oneLetter: "'{{name}}' is one letter: name what it holds (one letter is fine only in a one-line arrow function `(x) => ...`).",
    },
    schema: [],
  },
  create(context) {
    return {
      'Program:exit'() {
        const root = context.sourceCode.scopeManager.globalScope;
        if (root === null) return;
        // A class declaration binds its name twice (outside and inside the class): report it once.
        const reported = new Set<Scope.Definition['name']>();
        for (const scope of allScopes(root)) {
          for (const variable of scope.variables) {
            if (!isOneLetter(variable.name) || PLACEHOLDERS.has(variable.name)) continue;
            for (const definition of variable.defs) {
              if (reported.has(definition.name) || isAllowed(variable, definition)) continue;
              reported.add(definition.name);
              context.report({ node: definition.name, messageId: 'oneLetter', data: { name: variable.name } });
            }
          }
        }
      },
    };
  },
};

export default rule;
