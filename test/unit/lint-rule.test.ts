/**
 * The local lint rule `local/no-short-names` (eslint/rules/no-short-names.ts), driven by ESLint's
 * RuleTester: which one-letter declarations it reports and which it allows (tiny lambdas, counting
 * loop counters, `_`, type parameters, imports). TypeScript cases use typescript-eslint's parser, as
 * the lint of the tree does; a few plain JavaScript cases use ESLint's default parser.
 */
import { RuleTester } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, it } from 'vitest';
import noShortNames from '../../eslint/rules/no-short-names.js';

// RuleTester declares one vitest test per case through these hooks.
RuleTester.describe = describe;
RuleTester.it = it;
RuleTester.itOnly = it.only;

/** One expected report of the one-letter name `name`. */
const oneLetter = (name: string): RuleTester.TestCaseError => ({ messageId: 'oneLetter', data: { name } });

describe('local/no-short-names, TypeScript (typescript-eslint parser)', () => {
  new RuleTester({ languageOptions: { parser: tseslint.parser } }).run('no-short-names', noShortNames, {
    valid: [
      { name: 'names of two letters or more', code: 'const id = 1; function go(to: string): string { return to; }' },
      { name: 'tiny lambda parameter', code: 'const doubled = [1, 2].map((x) => x * 2);' },
      { name: 'tiny lambda with two parameters', code: '[3, 1].sort((a, b) => a - b);' },
      { name: 'tiny lambda without parentheses', code: 'const ids = list.map(x => x.id);' },
      { name: 'destructured parameter of a tiny lambda', code: 'const firsts = pairs.map(({ a }: { a: number }) => a);' },
      { name: 'typed and defaulted tiny lambda parameters', code: 'const pick = (n: number, m = 2): number => n * m;' },
      {
        name: 'counting loop counters i, j, k',
        code: 'for (let i = 0; i < 3; i++) for (let j = 0; j < i; j++) for (var k = 0; k < j; k++) use(i, j, k);',
      },
      {
        name: '_ as a placeholder',
        code: 'const [_, second] = pair; list.forEach((_) => { count++; }); try { run(); } catch (_) { retry(); }',
      },
      {
        name: 'type parameters',
        code: 'function identity<T>(value: T): T { return value; }\nclass Box<V> { constructor(readonly value: V) {} }',
      },
      {
        name: 'mapped type key and infer',
        code: 'type Mutable<T> = { -readonly [K in keyof T]: T[K] };\ntype Item<T> = T extends Array<infer U> ? U : T;',
      },
      { name: 'imported names', code: "import { z } from 'zod';\nimport * as R from 'ramda';\nimport D from 'dayjs';" },
      {
        name: 'property keys and class members are not declarations',
        code: 'const point = { x: 1, y: 2 };\nclass Shape { x = 0; m(): void {} }',
      },
      { name: 'assignment to an existing name', code: 'let total = 0; total = point.x;' },
    ],
    invalid: [
      { name: 'variable', code: 'const n = 1;', errors: [oneLetter('n')] },
      { name: 'several variables', code: 'let a, b;', errors: [oneLetter('a'), oneLetter('b')] },
      { name: 'destructured object name', code: 'const { a, bb } = source;', errors: [oneLetter('a')] },
      { name: 'destructured array names', code: 'const [x, y] = pair;', errors: [oneLetter('x'), oneLetter('y')] },
      { name: 'function name', code: 'function f(): void {}', errors: [oneLetter('f')] },
      { name: 'function parameter', code: 'function add(a: number, bb: number): number { return a + bb; }', errors: [oneLetter('a')] },
      { name: 'catch parameter', code: 'try { run(); } catch (e) { log(e); }', errors: [oneLetter('e')] },
      { name: 'class declaration, reported once', code: 'class C {}', errors: [oneLetter('C')] },
      { name: 'class expression name', code: 'const Shape = class S {};', errors: [oneLetter('S')] },
      { name: 'parameter property', code: 'class Point { constructor(private x: number) {} }', errors: [oneLetter('x')] },
      { name: 'type alias (not a type parameter)', code: 'type T = string;', errors: [oneLetter('T')] },
      { name: 'interface and enum', code: 'interface I { name: string }\nenum E { On }', errors: [oneLetter('I'), oneLetter('E')] },
      {
        name: 'function type parameters',
        code: 'type Compare = (a: number, b: number) => number;',
        errors: [oneLetter('a'), oneLetter('b')],
      },
      { name: 'method signature parameter', code: 'interface Store { get(k: string): number }', errors: [oneLetter('k')] },
      { name: 'arrow function with a block body', code: 'list.map((x) => { return x.id; });', errors: [oneLetter('x')] },
      { name: 'arrow function over two lines', code: 'list.map((x) =>\n  x.id);', errors: [oneLetter('x')] },
      { name: 'function expression parameter', code: 'list.map(function (x) { return x.id; });', errors: [oneLetter('x')] },
      { name: 'for...of binding, even i', code: 'for (const i of list) use(i);', errors: [oneLetter('i')] },
      { name: 'counter other than i, j, k', code: 'for (let n = 0; n < 3; n++) use(n);', errors: [oneLetter('n')] },
      { name: 'i outside a loop head', code: 'const i = list.indexOf(item);', errors: [oneLetter('i')] },
      {
        name: 'tiny lambda inside a long one: only the outer parameter',
        code: 'run((s) => {\n  return s.map((x) => x + 1);\n});',
        errors: [oneLetter('s')],
      },
    ],
  });
});

describe('local/no-short-names, JavaScript (default parser)', () => {
  new RuleTester().run('no-short-names', noShortNames, {
    valid: ['const doubled = [1, 2].map((x) => x * 2);', 'for (let i = 0; i < 3; i++) use(i);', "import { z } from 'zod';"],
    invalid: [
      { code: 'const n = 1;', errors: [oneLetter('n')] },
      { code: 'try { run(); } catch (e) { log(e); }', errors: [oneLetter('e')] },
      { code: 'class C {}', errors: [oneLetter('C')] },
      { code: 'list.map((x) => { return x; });', errors: [oneLetter('x')] },
    ],
  });
});
