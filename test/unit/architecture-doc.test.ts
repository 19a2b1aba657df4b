/**
 * docs/architecture.md stays the true map: its request-path listings are lines of the code they
 * describe, and every module it names exists.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const doc = readFileSync(`${ROOT}docs/architecture.md`, 'utf8');
const source = (path: string): string => readFileSync(`${ROOT}${path}`, 'utf8');

/** The ```ts blocks of the document, each with the source file named just before it. */
function listings(): Array<{ file: string; lines: string[] }> {
  const out: Array<{ file: string; lines: string[] }> = [];
  const block = /`(src\/[\w/.-]+\.ts)`[^`]*?```ts\n([\s\S]*?)```/g;
  for (let match = block.exec(doc); match !== null; match = block.exec(doc)) {
    out.push({
      file: match[1]!,
      lines: match[2]!
        .split('\n')
        .map((line) => line.trim())
        .filter((line) => line.length > 0),
    });
  }
  return out;
}

describe('docs/architecture.md', () => {
  it('has the request path of the handler and of the cached path, and every listed line is in the code', () => {
    const found = listings();
    expect(found.map((l) => l.file)).toEqual(['src/main/handler.ts', 'src/paths/rest/cached.ts']);
    for (const { file, lines } of found) {
      const code = source(file)
        .split('\n')
        .map((line) => line.trim());
      for (const line of lines) expect(code, `${file} should contain: ${line}`).toContain(line);
    }
  });

  it('names only modules that exist', () => {
    const paths = new Set<string>();
    for (const match of doc.matchAll(/`(src\/[\w/.-]+\.ts)`/g)) paths.add(match[1]!);
    // Module-map rows: | `src/folder/` | `a.ts`, `b.ts` | job |
    let folder = '';
    for (const row of doc.split('\n').filter((line) => line.startsWith('| '))) {
      const cells = row.split('|').map((cell) => cell.trim());
      const named = /^`(src\/[\w/-]*)`$/.exec(cells[1] ?? '');
      if (named !== null) folder = named[1]!;
      for (const module of (cells[2] ?? '').matchAll(/`([\w.-]+\.ts)`/g)) paths.add(`${folder}${module[1]}`);
    }
    expect(paths.size).toBeGreaterThan(60);
    for (const path of paths) expect(existsSync(`${ROOT}${path}`), path).toBe(true);
  });
});
