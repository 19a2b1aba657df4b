/**
 * Every relative link in the README, CONTRIBUTING.md, RELIABILITY.md, BENCHMARKS.md and docs/ points
 * at a file of the repository, and every `#anchor` at a heading of that file (GitHub's slugs), so moving
 * reference material between documents cannot leave a dead link behind.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');

const documents = [
  'README.md',
  'CONTRIBUTING.md',
  'RELIABILITY.md',
  'BENCHMARKS.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Markdown without its fenced code blocks (links in code are not links). */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '');
}

/** GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(markdown: string): Set<string> {
  return new Set([...prose(markdown).matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug(m[1]!)));
}

describe('links between the documents', () => {
  it('resolve to existing files and headings', () => {
    const broken: string[] = [];
    for (const doc of documents) {
      for (const link of prose(read(doc)).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = link[1]!;
        if (/^[a-z]+:/i.test(target)) continue; // http(s), mailto: not checked here
        const [path = '', anchor] = target.split('#');
        const file = path === '' ? doc : normalize(join(dirname(doc), path));
        if (!existsSync(join(root, file))) {
          broken.push(`${doc}: ${target} (no file ${file})`);
          continue;
        }
        if (anchor !== undefined && file.endsWith('.md') && !anchors(read(file)).has(anchor))
          broken.push(`${doc}: ${target} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
  });
});
