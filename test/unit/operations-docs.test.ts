/**
 * Keeps the metrics reference of docs/operations.md true to the code: the table lists every metric
 * of src/platform/metrics/specs.ts with its type and label names, and no metric name mentioned anywhere in
 * the README or docs/ is one that etagere does not export.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { METRIC_SPECS } from '../../src/platform/metrics/specs.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');

interface DocumentedMetric {
  type: string;
  labels: string[];
}

/** Rows of the `| Metric | Type | Labels | What |` table, by metric name. */
function metricTable(markdown: string): Map<string, DocumentedMetric> {
  const out = new Map<string, DocumentedMetric>();
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => /^\|\s*Metric\s*\|\s*Type\s*\|\s*Labels\s*\|/i.test(l));
  if (start < 0) return out;
  for (let i = start + 2; i < lines.length && lines[i]!.startsWith('|'); i++) {
    const [name = '', type = '', labels = ''] = lines[i]!.replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim());
    const labelNames = labels
      .replace(/\([^)]*\)/g, '')
      .split(',')
      .map((l) => l.trim())
      .filter((l) => l.length > 0);
    out.set(name.replace(/`/g, ''), { type, labels: labelNames });
  }
  return out;
}

const specs = Object.values(METRIC_SPECS).map((spec): { name: string; type: string; labels: string[] } => ({
  name: spec.name,
  type: spec.type,
  labels: [...spec.labelNames],
}));
const known: ReadonlySet<string> = new Set(specs.map((spec) => spec.name));
const table = metricTable(read('docs/operations.md'));

describe('docs/operations.md metrics against src/platform/metrics/specs.ts', () => {
  it('lists every metric with its type and labels', () => {
    expect(specs.length).toBeGreaterThan(20);
    const wrong = specs
      .filter((spec) => {
        const documented = table.get(spec.name);
        return documented === undefined || documented.type !== spec.type || documented.labels.join(',') !== spec.labels.join(',');
      })
      .map((spec) => `${spec.name} (${spec.type}; ${spec.labels.join(', ') || 'no labels'})`);
    expect(wrong, 'metrics missing from docs/operations.md, or documented with another type or labels').toEqual([]);
  });

  it('lists no metric that does not exist', () => {
    expect([...table.keys()].filter((n) => !known.has(n))).toEqual([]);
  });

  it('mentions no unknown etagere_ metric anywhere in the README or docs/', () => {
    const files = [
      'README.md',
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const unknown: string[] = [];
    for (const file of files) {
      for (const mention of read(file).matchAll(/\betagere_[a-z0-9_]+/g)) {
        const name = mention[0];
        // Node's process metrics (collectDefaultMetrics with the etagere_ prefix) and histogram series.
        if (/^etagere_(process|nodejs)_/.test(name)) continue;
        if (known.has(name) || known.has(name.replace(/_(bucket|sum|count)$/, ''))) continue;
        unknown.push(`${file}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });
});
