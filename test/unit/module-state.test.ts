/**
 * State lives in instances: no module of src/ keeps a top-level `let`/`var`, or an empty Map, Set,
 * WeakMap, WeakSet, array or object to fill later, so two proxies in one process share no table.
 * Constant tables, filled where they are declared, are fine.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const COLLECTIONS = new Set(['Map', 'Set', 'WeakMap', 'WeakSet']);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

/** An initialiser that makes a container to fill later: `new Map()`, `[]`, `{}`. */
function emptyContainer(init: ts.Expression | undefined): boolean {
  if (init === undefined) return false;
  const bare = ts.isAsExpression(init) || ts.isSatisfiesExpression(init) ? init.expression : init;
  if (ts.isNewExpression(bare) && ts.isIdentifier(bare.expression) && COLLECTIONS.has(bare.expression.text))
    return (bare.arguments ?? []).length === 0;
  if (ts.isArrayLiteralExpression(bare)) return bare.elements.length === 0;
  if (ts.isObjectLiteralExpression(bare)) return bare.properties.length === 0;
  return false;
}

/** `name:line declared` for each module-level let, var or empty container in a file's text. */
function moduleState(name: string, text: string): string[] {
  const file = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  for (const statement of file.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    const list = statement.declarationList;
    const mutable = (list.flags & (ts.NodeFlags.Let | ts.NodeFlags.Const)) !== ts.NodeFlags.Const;
    for (const declaration of list.declarations) {
      if (mutable || emptyContainer(declaration.initializer)) {
        const { line } = file.getLineAndCharacterOfPosition(declaration.getStart());
        found.push(`${name}:${line + 1} ${declaration.name.getText()}`);
      }
    }
  }
  return found;
}

describe('module-level state', () => {
  it('src/ keeps no mutable table or variable at module level', () => {
    const found = sources(join(ROOT, 'src')).flatMap((path) => moduleState(relative(ROOT, path), readFileSync(path, 'utf8')));
    expect(found).toEqual([]);
  });

  it('the check finds a module-level let and an empty Map', () => {
    const probe = 'let count = 0;\nconst seen = new Map<string, number>();\nconst KINDS = new Set([1]);\nconst LIST = [] as string[];\n';
    expect(moduleState('probe.ts', probe)).toEqual(['probe.ts:1 count', 'probe.ts:2 seen', 'probe.ts:4 LIST']);
  });
});
