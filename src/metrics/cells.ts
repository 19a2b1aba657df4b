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

/** The cells of one metric by label set, each made on first use and then kept. */
class LabelSets<C> {
  private readonly sets = new Map<string, { labels: Labels; cell: C }>();

  constructor(
    private readonly names: readonly string[],
    private readonly make: () => C,
  ) {}

  /** The cell of one label set (label values in `labelNames` order). */
  cell(values: readonly string[]): C {
    const key = values.join('\u0000');
    let set = this.sets.get(key);
    if (set === undefined) {
      const labels: Labels = {};
      this.names.forEach((n, i) => (labels[n] = values[i] ?? ''));
      set = { labels, cell: this.make() };
      this.sets.set(key, set);
    }
    return set.cell;
  }

  all(): IterableIterator<{ labels: Labels; cell: C }> {
    return this.sets.values();
  }
}

export class CellCounter<T extends string> extends Counter<T> {
  private readonly cells: LabelSets<CountCell>;
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(config: CounterConfiguration<T>) {
    super(config);
    this.cells = new LabelSets(config.labelNames ?? [], () => ({ value: 0 }));
    this.metricName = config.name;
    this.metricHelp = config.help;
  }

  /** The cell of one label set (label values in `labelNames` order). Resolve once, keep it. */
  cell(...values: string[]): CountCell {
    return this.cells.cell(values);
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
    for (const { cell } of this.cells?.all() ?? []) cell.value = 0;
  }

  private export(): Exported {
    const values: Exported['values'] = [];
    for (const { labels, cell } of this.cells.all()) values.push({ labels, value: cell.value });
    return { name: this.metricName, help: this.metricHelp, type: 'counter', aggregator: 'sum', values };
  }
}

export class CellHistogram<T extends string> extends Histogram<T> {
  private readonly cells: LabelSets<HistogramCell>;
  private readonly bounds: number[];
  private readonly metricName: string;
  private readonly metricHelp: string;

  constructor(config: HistogramConfiguration<T> & { buckets: number[] }) {
    super(config);
    const bounds = [...config.buckets].sort((a, b) => a - b);
    this.bounds = bounds;
    this.cells = new LabelSets(config.labelNames ?? [], () => newCell(bounds));
    this.metricName = config.name;
    this.metricHelp = config.help;
  }

  /** The cell of one label set (label values in `labelNames` order). Resolve once, keep it. */
  cell(...values: string[]): HistogramCell {
    return this.cells.cell(values);
  }

  override async get(): ReturnType<Histogram<T>['get']> {
    return this.export() as unknown as Awaited<ReturnType<Histogram<T>['get']>>;
  }

  async getForPromString(): Promise<Exported> {
    return this.export();
  }

  override reset(): void {
    for (const { cell } of this.cells?.all() ?? []) {
      cell.counts.fill(0);
      cell.sum = 0;
      cell.count = 0;
    }
  }

  private export(): Exported {
    const values: Exported['values'] = [];
    const bucket = `${this.metricName}_bucket`;
    for (const { labels, cell } of this.cells.all()) {
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
