/**
 * The one label-set cache: a value per label set (a prom-client child, a number cell, or a pair
 * of them), made on first use and then kept. prom-client hashes and validates label values on
 * every `labels()`/`inc(labels)` call; where that happens per request (the request metrics, the
 * Redis operation counters) the child is resolved once here and each later use costs one Map
 * lookup on the joined values. Label sets are bounded (see specs.ts), so the map is too.
 */

/** Joins label values into one map key; a value never contains it. */
const SEPARATOR = '\u0000';

export class LabelSets<V> {
  private readonly sets = new Map<string, V>();

  /** `make` builds the value of a label set the first time it is asked for. */
  constructor(private readonly make: (...values: string[]) => V) {}

  /** The value of one label set (label values in `labelNames` order). */
  of(...values: string[]): V {
    const key = values.join(SEPARATOR);
    let value = this.sets.get(key);
    if (value === undefined) {
      value = this.make(...values);
      this.sets.set(key, value);
    }
    return value;
  }

  /** Every value made so far, in the order their label sets were first seen. */
  values(): IterableIterator<V> {
    return this.sets.values();
  }
}
