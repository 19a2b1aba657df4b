/**
 * The one label-set cache: a value per label set (a prom-client child, a number cell, or a pair
 * of them), made on first use and then kept. prom-client hashes and validates label values on
 * every `labels()`/`inc(labels)` call; where that happens per request (the request metrics, the
 * Redis operation counters) the child is resolved once here and each later use costs one Map
 * lookup per label value. Label sets are bounded (see specs.ts), so the map is too.
 */

type Node<V> = Map<string, Node<V> | V>;

export class LabelSets<V> {
  /** One level per label, in label order; the last level holds the values. */
  private readonly root: Node<V> = new Map();
  private readonly all: V[] = [];

  /** `make` builds the value of a label set the first time it is asked for. */
  constructor(private readonly make: (...values: string[]) => V) {}

  /**
   * The value of one label set (label values in `labelNames` order). One Map lookup per label
   * with the values as they come (their hashes are cached in the strings): no joined key to
   * build and hash on every call.
   */
  of(...values: string[]): V {
    let node = this.root;
    const last = values.length - 1;
    for (let index = 0; index < last; index++) {
      const label = values[index]!;
      let next = node.get(label) as Node<V> | undefined;
      if (next === undefined) {
        next = new Map();
        node.set(label, next);
      }
      node = next;
    }
    const label = last < 0 ? '' : values[last]!;
    let value = node.get(label) as V | undefined;
    if (value === undefined) {
      value = this.make(...values);
      node.set(label, value);
      this.all.push(value);
    }
    return value;
  }

  /**
   * Forgets every label set whose first value is `first` (a consumer label given up): they are
   * made anew if asked for again. Values are never Maps (the tree's nodes are).
   */
  drop(first: string): void {
    const node = this.root.get(first);
    if (node === undefined) return;
    this.root.delete(first);
    const gone = new Set<V>();
    const collect = (at: Node<V> | V): void => {
      if (at instanceof Map) for (const child of at.values()) collect(child);
      else gone.add(at);
    };
    collect(node);
    const kept = this.all.filter((value) => !gone.has(value));
    this.all.length = 0;
    this.all.push(...kept);
  }

  /** Every value made so far, in the order their label sets were first seen. */
  values(): IterableIterator<V> {
    return this.all.values();
  }
}
