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
import { LabelSets } from './labels.js';

export interface CountCell {
  value: number;
}

/** A counter's series worked out at scrape time from another table: label values (in `labelNames` order) and value. */
export type CountRows = () => Iterable<readonly [readonly string[], number]>;
/** A histogram's series worked out at scrape time: label values, counts per bucket (not cumulative, the last above every bound) and sum. */
export type HistogramRows = () => Iterable<readonly [readonly string[], readonly number[], number]>;

/** Label values in `names` order as the registry's label record. */
function labelRecord(names: readonly string[], values: readonly string[]): Labels {
  const labels: Labels = {};
  names.forEach((name, index) => (labels[name] = values[index] ?? ''));
  return labels;
}

export interface HistogramCell {
  /** Per bucket (not cumulative); the last slot counts observations above every bound (+Inf only). */
  readonly counts: number[];
  sum: number;
  count: number;
  observe(seconds: number): void;
}

type Labels = Record<string, string | number>;

interface Exported {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  values: Array<{ labels: Labels; value: number; metricName?: string }>;
}

/** A cell and the label set it counts for (as the registry exports it). */
interface Labelled<C> {
  readonly labels: Labels;
  readonly cell: C;
}

/** The cells of one metric, one per label set, in the shared label-set cache. */
function cellsByLabels<C>(names: readonly string[], make: () => C): LabelSets<Labelled<C>> {
  return new LabelSets((...values) => {
    const labels: Labels = {};
    names.forEach((n, i) => (labels[n] = values[i] ?? ''));
    return { labels, cell: make() };
  });
}

export class CellCounter<T extends string> extends Counter<T> {
  private readonly cells: LabelSets<Labelled<CountCell>>;
  private readonly metricName: string;
  private readonly metricHelp: string;
  private readonly names: readonly string[];
  private rows: CountRows | undefined = undefined;

  constructor(config: CounterConfiguration<T>) {
    super(config);
    this.names = config.labelNames ?? [];
    this.cells = cellsByLabels(this.names, () => ({ value: 0 }));
    this.metricName = config.name;
    this.metricHelp = config.help;
  }

  /** From now on the series are `rows`, worked out at scrape time (a view of another table), not cells of its own. */
  derive(rows: CountRows): void {
    this.rows = rows;
  }

  /** The cell of one label set (label values in `labelNames` order). Resolve once, keep it. */
  cell(...values: string[]): CountCell {
    return this.cells.of(...values).cell;
  }

  /** Removes the series whose first label value is `first` (a consumer label given up); cells held stop counting. */
  forget(first: string): void {
    this.cells.drop(first);
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
    if (this.rows !== undefined) for (const [labels, value] of this.rows()) values.push({ labels: labelRecord(this.names, labels), value });
    else for (const { labels, cell } of this.cells.values()) values.push({ labels, value: cell.value });
    return { name: this.metricName, help: this.metricHelp, type: 'counter', aggregator: 'sum', values };
  }
}

export class CellHistogram<T extends string> extends Histogram<T> {
  private readonly cells: LabelSets<Labelled<HistogramCell>>;
  private readonly bounds: number[];
  private readonly metricName: string;
  private readonly metricHelp: string;
  private readonly names: readonly string[];
  private rows: HistogramRows | undefined = undefined;

  constructor(config: HistogramConfiguration<T> & { buckets: number[] }) {
    super(config);
    const bounds = [...config.buckets].sort((a, b) => a - b);
    this.bounds = bounds;
    this.names = config.labelNames ?? [];
    this.cells = cellsByLabels(this.names, () => newCell(bounds));
    this.metricName = config.name;
    this.metricHelp = config.help;
  }

  /** Its bucket bounds, ascending (a table feeding `derive` counts in these). */
  bucketBounds(): readonly number[] {
    return this.bounds;
  }

  /** From now on the series are `rows`, worked out at scrape time (a view of another table), not cells of its own. */
  derive(rows: HistogramRows): void {
    this.rows = rows;
  }

  /** The cell of one label set (label values in `labelNames` order). Resolve once, keep it. */
  cell(...values: string[]): HistogramCell {
    return this.cells.of(...values).cell;
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
    if (this.rows !== undefined)
      for (const [labels, counts, sum] of this.rows()) this.series(values, labelRecord(this.names, labels), counts, sum);
    else for (const { labels, cell } of this.cells.values()) this.series(values, labels, cell.counts, cell.sum);
    return { name: this.metricName, help: this.metricHelp, type: 'histogram', aggregator: 'sum', values };
  }

  /** One label set's buckets (cumulative), sum and count. */
  private series(values: Exported['values'], labels: Labels, counts: readonly number[], sum: number): void {
    const bucket = `${this.metricName}_bucket`;
    let acc = 0;
    this.bounds.forEach((le, index) => {
      acc += counts[index]!;
      values.push({ labels: { le, ...labels }, value: acc, metricName: bucket });
    });
    const count = acc + counts[this.bounds.length]!;
    values.push({ labels: { le: '+Inf', ...labels }, value: count, metricName: bucket });
    values.push({ labels, value: sum, metricName: `${this.metricName}_sum` });
    values.push({ labels, value: count, metricName: `${this.metricName}_count` });
  }
}

function newCell(bounds: readonly number[]): HistogramCell {
  const counts = new Array<number>(bounds.length + 1).fill(0);
  return {
    counts,
    sum: 0,
    count: 0,
    observe(value: number): void {
      let slot = 0;
      while (slot < bounds.length && value > bounds[slot]!) slot++;
      counts[slot]!++;
      this.sum += value;
      this.count++;
    },
  };
}
