/**
 * The keys L1 holds, indexed by upstream and path (normal form, path-scope.ts), so that marking a
 * scope stale touches the entries under it and nothing else: an exact scope is one node, a prefix
 * scope one subtree; never a scan of the whole L1. A tree of path segments per upstream; each node
 * holds the keys stored under exactly its path (every query, partition and representation).
 *
 * L1 keeps it current (memory-store.ts hooks): a key is added when it enters the LRU and removed
 * when it leaves (eviction, expiry, deletion). The keys are the LRU's own strings; the index adds a
 * set slot per key and a node per distinct path segment.
 */
import { keyPath, segmentsOf, type PathScope } from '../rules/path-scope.js';

interface Node {
  keys: Set<string> | undefined;
  children: Map<string, Node> | undefined;
}

export interface PathIndex {
  add(key: string): void;
  remove(key: string): void;
  /** The keys in a scope: those stored under its exact path, or (prefix) under it and below. */
  keysIn(scope: PathScope): string[];
  /** Keys indexed (for tests and /admin/cache/stats). */
  readonly size: number;
}

const newNode = (): Node => ({ keys: undefined, children: undefined });

export function createPathIndex(): PathIndex {
  const roots = new Map<string, Node>();
  let size = 0;

  const find = (upstream: string, path: string): Node | undefined => {
    let node = roots.get(upstream);
    for (const segment of segmentsOf(path)) {
      if (node === undefined) return undefined;
      node = node.children?.get(segment);
    }
    return node;
  };

  const collect = (node: Node, out: string[]): void => {
    if (node.keys !== undefined) for (const key of node.keys) out.push(key);
    if (node.children !== undefined) for (const child of node.children.values()) collect(child, out);
  };

  return {
    add(key) {
      const where = keyPath(key);
      if (where === undefined) return;
      let node = roots.get(where.upstream);
      if (node === undefined) roots.set(where.upstream, (node = newNode()));
      for (const segment of segmentsOf(where.path)) {
        node.children ??= new Map();
        let child = node.children.get(segment);
        if (child === undefined) node.children.set(segment, (child = newNode()));
        node = child;
      }
      node.keys ??= new Set();
      if (!node.keys.has(key)) {
        node.keys.add(key);
        size++;
      }
    },
    remove(key) {
      const where = keyPath(key);
      if (where === undefined) return;
      const root = roots.get(where.upstream);
      if (root === undefined) return;
      // The path from the root, to prune the nodes the key leaves empty.
      const trail: Array<[Node, string]> = [];
      let node: Node | undefined = root;
      for (const segment of segmentsOf(where.path)) {
        const child: Node | undefined = node.children?.get(segment);
        if (child === undefined) return;
        trail.push([node, segment]);
        node = child;
      }
      if (node.keys?.delete(key) !== true) return;
      size--;
      if (node.keys.size === 0) node.keys = undefined;
      for (let at = trail.length - 1; at >= 0; at--) {
        const [parent, segment] = trail[at]!;
        const child = parent.children!.get(segment)!;
        if (child.keys !== undefined || (child.children !== undefined && child.children.size > 0)) break;
        parent.children!.delete(segment);
      }
      if (root.keys === undefined && (root.children === undefined || root.children.size === 0)) roots.delete(where.upstream);
    },
    keysIn(scope) {
      const node = find(scope.upstream, scope.path);
      if (node === undefined) return [];
      if (!scope.prefix) return node.keys === undefined ? [] : [...node.keys];
      const out: string[] = [];
      collect(node, out);
      return out;
    },
    get size() {
      return size;
    },
  };
}
