/**
 * The import rules `npm run lint` relies on (eslint/floors.ts) fire: violations are planted in a
 * temporary copy of the tree and linted with the project's own configuration. A cycle is an error
 * anywhere (src/, the fake GitHub, tests), an import up a floor of src/ is one, and so are the
 * fake GitHub importing the proxy and the product importing a test. The lint rule skips cycles that
 * run only through type imports (nothing cycles at run time); the tree has none of those either,
 * checked here on the whole import graph.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ESLint } from 'eslint';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
/** What the lint configuration reads, and the trees violations are planted in. */
const COPIED = ['eslint.config.ts', 'eslint', 'tsconfig.json', 'package.json', 'src', 'fake-github', 'test/helpers'];
/** The trees whose import graph may hold no circle, type imports included. */
const TREES = ['src', 'fake-github', 'bench', 'scripts', 'test', 'eslint'];

/** Every `.ts` file under `dir`. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** The circles of the relative imports (type imports and re-exports included) of `trees` under `root`, as paths. */
function importCircles(root: string, trees: readonly string[]): string[][] {
  const files = trees.flatMap((tree) => tsFiles(join(root, tree)));
  const known = new Set(files);
  const imports = new Map<string, string[]>();
  for (const file of files) {
    const found = ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles;
    const local = found
      .filter((ref) => ref.fileName.startsWith('.'))
      .map((ref) => resolve(dirname(file), ref.fileName.replace(/\.js$/, '.ts')));
    imports.set(
      file,
      local.filter((target) => known.has(target)),
    );
  }
  // Tarjan's strongly connected components: each with more than one module is a circle.
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (file: string): void => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const target of imports.get(file)!) {
      if (!order.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, order.get(target)!));
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(relative(root, member));
    } while (member !== file);
    if (component.length > 1) circles.push(component.sort());
  };
  for (const file of files) if (!order.has(file)) visit(file);
  return circles;
}

describe('import rules', () => {
  let copy: string;
  /** The rules each planted file broke, by its path in the copy. */
  let reported: Map<string, string[]>;

  const planted: Record<string, string> = {
    // A value cycle in src/, inside one floor.
    'src/platform/planted-left.ts': "import { right } from './planted-right.js';\nexport const left = (): number => right() + 1;\n",
    'src/platform/planted-right.ts': "import { left } from './planted-left.js';\nexport const right = (): number => left() - 1;\n",
    // A cycle through three of the fake's modules, one of them a real one.
    'fake-github/planted-cycle.ts':
      "import { CONTROL_PREFIX } from './control.js';\nexport const plantedPrefix = (): string => CONTROL_PREFIX;\n",
    'fake-github/planted-user.ts': "import { plantedPrefix } from './planted-cycle.js';\nexport const used = plantedPrefix();\n",
    // A cycle among tests.
    'test/helpers/planted-one.ts': "import { two } from './planted-two.js';\nexport const one = (): number => two();\n",
    'test/helpers/planted-two.ts': "import { one } from './planted-one.js';\nexport const two = (): number => one();\n",
    // Up a floor: the platform imports the composition root.
    'src/platform/planted-up.ts': "import { buildServices } from '../main/services.js';\nexport const built = buildServices;\n",
    // Sideways: a path imports another.
    'src/paths/rest/planted-sideways.ts': "import * as hooks from '../webhooks/receiver.js';\nexport const receiver = hooks;\n",
    // The fake GitHub imports the proxy; the product imports a test helper.
    'fake-github/planted-proxy.ts': "import { errors } from '../src/http/errors.js';\nexport const proxyErrors = errors;\n",
    'src/http/planted-test.ts': "import { one } from '../../test/helpers/planted-one.js';\nexport const fromTest = one;\n",
    // A cycle through a type import only: nothing cycles at run time, so the lint rule lets it be.
    'src/platform/planted-typed.ts':
      "import type { TypedUser } from './planted-typed-user.js';\nexport const typed = (user: TypedUser): number => user.count;\n",
    'src/platform/planted-typed-user.ts':
      "import { typed } from './planted-typed.js';\nexport interface TypedUser { count: number }\nexport const counted = typed({ count: 1 });\n",
  };

  beforeAll(async () => {
    copy = mkdtempSync(join(tmpdir(), 'etagere-import-rules-'));
    for (const name of COPIED) cpSync(join(ROOT, name), join(copy, name), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
    for (const [file, text] of Object.entries(planted)) writeFileSync(join(copy, file), text);
    // Lint the cycle of the fake from the real module's side too: control.ts now imports it back.
    const control = join(copy, 'fake-github/control.ts');
    writeFileSync(control, `import './planted-user.js';\n${readFileSync(control, 'utf8')}`);
    const eslint = new ESLint({ cwd: copy });
    const results = await eslint.lintFiles([...Object.keys(planted), 'fake-github/control.ts']);
    reported = new Map(
      results.map((result) => [relative(copy, result.filePath), result.messages.map((message) => message.ruleId ?? message.message)]),
    );
  }, 120_000);

  afterAll(() => {
    if (copy !== undefined) rmSync(copy, { recursive: true, force: true });
  });

  it('a value cycle fails lint in src/, in the fake GitHub and in the tests', () => {
    for (const file of [
      'src/platform/planted-left.ts',
      'src/platform/planted-right.ts',
      'test/helpers/planted-one.ts',
      'test/helpers/planted-two.ts',
    ])
      expect(reported.get(file), file).toContain('import-x/no-cycle');
    expect(reported.get('fake-github/planted-cycle.ts')).toContain('import-x/no-cycle');
    expect(reported.get('fake-github/control.ts')).toContain('import-x/no-cycle');
  });

  it('an import up a floor, or from one path into another, fails lint', () => {
    expect(reported.get('src/platform/planted-up.ts')).toContain('import-x/no-restricted-paths');
    expect(reported.get('src/paths/rest/planted-sideways.ts')).toContain('import-x/no-restricted-paths');
  });

  it('the fake GitHub importing the proxy, or the product importing a test, fails lint', () => {
    expect(reported.get('fake-github/planted-proxy.ts')).toContain('import-x/no-restricted-paths');
    expect(reported.get('src/http/planted-test.ts')).toContain('import-x/no-restricted-paths');
  });

  it('a cycle through type imports alone passes lint, and the import graph check finds it', () => {
    expect(reported.get('src/platform/planted-typed.ts')).toEqual([]);
    expect(reported.get('src/platform/planted-typed-user.ts')).toEqual([]);
    expect(importCircles(copy, ['src'])).toContainEqual(['src/platform/planted-typed-user.ts', 'src/platform/planted-typed.ts']);
  });

  it('the tree has no import circle, type imports included', () => {
    expect(importCircles(ROOT, TREES)).toEqual([]);
  });
});
