/**
 * Builds the prom-client metrics of the spec table (specs.ts) into one Registry: each spec
 * becomes a Counter, Histogram or Gauge (or, for `cells` specs, the number-cell classes of
 * cells.ts, which export the same text), and the gauges in WATCHED_GAUGES read their source at
 * scrape time. The result is typed per key from the table, so `built.tokenEvents` is a
 * `Counter<'token' | 'event'>`.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { CellCounter, CellHistogram } from './cells.js';
import { METRIC_SPECS, type LabelName, type MetricKey, type MetricSpec } from './specs.js';
import { WATCHED_GAUGES, type GaugeSources, type WatchedGauge } from './watched-gauges.js';

type SpecOf<K extends MetricKey> = (typeof METRIC_SPECS)[K];

/** The prom-client class a spec is built as. */
type Built<K extends MetricKey> =
  SpecOf<K> extends { type: 'counter'; cells: true }
    ? CellCounter<LabelName<K>>
    : SpecOf<K> extends { type: 'counter' }
      ? Counter<LabelName<K>>
      : SpecOf<K> extends { type: 'histogram'; cells: true }
        ? CellHistogram<LabelName<K>>
        : SpecOf<K> extends { type: 'histogram' }
          ? Histogram<LabelName<K>>
          : Gauge<LabelName<K>>;

export type BuiltMetrics = { readonly [K in MetricKey]: Built<K> };

type AnyMetric = Counter | Histogram | Gauge;

const isWatched = (key: MetricKey): key is WatchedGauge => Object.hasOwn(WATCHED_GAUGES, key);

function build(key: MetricKey, spec: MetricSpec, registers: Registry[], sources: GaugeSources): AnyMetric {
  const common = { name: spec.name, help: spec.help, labelNames: spec.labelNames, registers };
  switch (spec.type) {
    case 'counter': {
      if (spec.cells) return new CellCounter(common);
      const counter = new Counter(common);
      for (const values of spec.initial ?? []) counter.labels(...values).inc(0);
      return counter;
    }
    case 'histogram': {
      const config = { ...common, buckets: [...spec.buckets] };
      return spec.cells ? new CellHistogram(config) : new Histogram(config);
    }
    case 'gauge': {
      const read = isWatched(key) ? (WATCHED_GAUGES[key] as (gauge: Gauge, sources: GaugeSources) => void) : undefined;
      return new Gauge({
        ...common,
        ...(spec.aggregator === undefined ? {} : { aggregator: spec.aggregator }),
        ...(read === undefined
          ? {}
          : {
              collect(this: Gauge) {
                read(this, sources);
              },
            }),
      });
    }
  }
}

/** Every metric of the spec table, registered in `registry` in table order. */
export function buildMetrics(registry: Registry, sources: GaugeSources): BuiltMetrics {
  const built = new Map<MetricKey, AnyMetric>();
  for (const [key, spec] of Object.entries(METRIC_SPECS) as Array<[MetricKey, MetricSpec]>) {
    built.set(key, build(key, spec, [registry], sources));
  }
  // build() makes each key the class Built<key> names (the switch above is that mapping).
  return Object.fromEntries(built) as unknown as BuiltMetrics;
}
