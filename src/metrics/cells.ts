/**
 * A counter and a histogram for the per-request metrics whose children are plain number cells.
 * prom-client's own children hash and validate their labels on every inc()/observe(); on the hit
 * path that was about 2 µs a request (a tenth of it). Here a child is resolved once per label set
 * and an observation is an addition (and a bucket search for the histogram).
 *
 * Both are prom-client metric classes: they register in a Registry through `registers` like any
 * other, and export exactly the values prom-client's Counter and Histogram would (same names,
 * labels, bucket series, sum and count), so /metrics, promtool and the cluster aggregation see no
 * difference. Only `cell()` feeds them: the inherited inc()/observe()/labels() are not used.
 */
import { Counter, Histogram, type CounterConfiguration, type HistogramConfiguration } from 'prom-client';

export interface CountCell {
  value: number;
}

export interface HistogramCell {
  /** Per bucket (not cumulative); the last slot counts observations above every bound (+Inf only). */
  readonly counts: number[];
  sum: number;
  count: number;
  observe(v: number): void;
}

type Labels = Record<string, string | number>;

interface Exported {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: Array<{ labels: Labels; value: number; metricName?: string }>;
}

function labelsOf(names: readonly string[], values: readonly string[]): Labels {
  const labels: Labels = {};
  names.forEach((n, i) => (labels[n] = values[i] ?? ''));
  return labels;
}

export class CellCounter<T extends string> extends Counter<T> {
  private readonly cells = new Map<string, { labels: Labels; cell: CountCell }>();
  private readonly names: readonly T[];
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(config: CounterConfiguration<T>) {
    super(config);
    this.names = config.labelNames ?? [];
    this.metricName = config.name;
    this.metricHelp = config.help;
  }

  /** The cell of one label set (label values in `labelNames` order). Resolve once, keep it. */
  cell(...values: string[]): CountCell {
    const key = values.join('\u0000');
    let c = this.cells.get(key);
    if (c === undefined) {
      c = { labels: labelsOf(this.names, values), cell: { value: 0 } };
      this.cells.set(key, c);
    }
    return c.cell;
  }

  override async get(): ReturnType<Counter<T>['get']> {
    return this.export() as unknown as Awaited<ReturnType<Counter<T>['get']>>;
  }

  /** What prom-client's registry reads when it renders the text format. */
  async getForPromString(): Promise<Exported> {
    return this.export();
  }

  override reset(): void {
    // prom-client's constructor calls reset() before this class's fields exist.
    for (const { cell } of this.cells?.values() ?? []) cell.value = 0;
  }

  private export(): Exported {
    const values: Exported['values'] = [];
    for (const { labels, cell } of this.cells.values()) values.push({ labels, value: cell.value });
    return { name: this.metricName, help: this.metricHelp, type: 'counter', aggregator: 'sum', values };
  }
}

export class CellHistogram<T extends string> extends Histogram<T> {
  private readonly cells = new Map<string, { labels: Labels; cell: HistogramCell }>();
  private readonly names: readonly T[];
  private readonly bounds: number[];
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(config: HistogramConfiguration<T> & { buckets: number[] }) {
    super(config);
    this.names = config.labelNames ?? [];
    this.metricName = config.name;
    this.metricHelp = config.help;
    this.bounds = [...config.buckets].sort((a, b) => a - b);
  }

  /** The cell of one label set (label values in `labelNames` order). Resolve once, keep it. */
  cell(...values: string[]): HistogramCell {
    const key = values.join('\u0000');
    let c = this.cells.get(key);
    if (c === undefined) {
      c = { labels: labelsOf(this.names, values), cell: newCell(this.bounds) };
      this.cells.set(key, c);
    }
    return c.cell;
  }

  override async get(): ReturnType<Histogram<T>['get']> {
    return this.export() as unknown as Awaited<ReturnType<Histogram<T>['get']>>;
  }

  async getForPromString(): Promise<Exported> {
    return this.export();
  }

  override reset(): void {
    for (const { cell } of this.cells?.values() ?? []) {
      cell.counts.fill(0);
      cell.sum = 0;
      cell.count = 0;
    }
  }

  private export(): Exported {
    const values: Exported['values'] = [];
    const bucket = `${this.metricName}_bucket`;
    for (const { labels, cell } of this.cells.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += cell.counts[i]!;
        values.push({ labels: { le, ...labels }, value: acc, metricName: bucket });
      });
      values.push({ labels: { le: '+Inf', ...labels }, value: cell.count, metricName: bucket });
      values.push({ labels, value: cell.sum, metricName: `${this.metricName}_sum` });
      values.push({ labels, value: cell.count, metricName: `${this.metricName}_count` });
    }
    return { name: this.metricName, help: this.metricHelp, type: 'histogram', aggregator: 'sum', values };
  }
}

function newCell(bounds: readonly number[]): HistogramCell {
  const counts = new Array<number>(bounds.length + 1).fill(0);
  return {
    counts,
    sum: 0,
    count: 0,
    observe(v: number): void {
      let i = 0;
      while (i < bounds.length && v > bounds[i]!) i++;
      counts[i]!++;
      this.sum += v;
      this.count++;
    },
  };
}
