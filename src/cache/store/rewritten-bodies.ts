/**
 * The bounded memory of rewritten bodies: per stored entry, the form served for each public base
 * (clients reach the proxy under a handful of names: a service name, localhost, an ingress host),
 * so that a body is rewritten once per entry and base, not per hit. An LRU keyed by the entry
 * itself (a replaced entry is a new object and a new key; the old one ages out), bounded in bytes
 * (src/platform/memo.ts),
 * with at most MAX_BASES forms an entry, the least recently used replaced first: no client can fill
 * memory by sending Host names, nor pin an entry's slots so that its regular clients' form is never
 * kept. Its size is exported in `etagere_cache_bytes`.
 */
import { createMemo } from '../../platform/memo.js';

/** Public bases kept per entry. */
export const MAX_BASES = 4;
/** Per-form cost beyond its body: the header list and the slot (an estimate on the high side). */
const FORM_OVERHEAD = 512;

export interface Form {
  readonly base: string;
  readonly body: Buffer;
}

export interface RewrittenBodies<F extends Form> {
  get(entry: object, base: string): F | undefined;
  set(entry: object, form: F): void;
  /** Drops an entry's forms (the entry left the cache). */
  forget(entry: object): void;
  /** Bytes held, as counted against the bound. */
  readonly bytes: number;
}

/** `grew`: called after a form was kept (the decoded bodies count against L1's bound, which then gives way: services.ts). */
export function createRewrittenBodies<F extends Form>(maxBytes: number, grew?: () => void): RewrittenBodies<F> {
  const lru = createMemo<object, F[]>(maxBytes, (_entry, forms) => forms.reduce((sum, form) => sum + form.body.length + FORM_OVERHEAD, 0));
  return {
    get(entry, base) {
      const forms = lru.get(entry);
      if (forms === undefined) return undefined;
      const last = forms.length - 1;
      for (let index = last; index >= 0; index--) {
        const form = forms[index]!;
        if (form.base !== base) continue;
        // The most recently used form goes last, in place (same forms, same size): no allocation on a hit.
        if (index !== last) {
          forms.copyWithin(index, index + 1);
          forms[last] = form;
        }
        return form;
      }
      return undefined;
    },
    set(entry, form) {
      const forms = lru.peek(entry) ?? [];
      const kept = forms.filter((held) => held.base !== form.base);
      lru.set(entry, [...kept.slice(Math.max(0, kept.length - MAX_BASES + 1)), form]);
      grew?.();
    },
    forget(entry) {
      lru.delete(entry);
    },
    get bytes() {
      return lru.bytes;
    },
  };
}
