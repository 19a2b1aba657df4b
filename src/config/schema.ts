/**
 * The configuration schema: the one description of every setting, its type and its default.
 * Keys are snake_case as they appear in YAML. `loadConfig` (load.ts) applies environment
 * overrides before validating, so an invalid value from either source is reported by key.
 */
import { z } from 'zod';

const port = z.number().int().min(0).max(65535);
const host = z.string().min(1);
const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL');

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** How responses of one upstream are cached. The rules live in src/cache/policy.ts. */
export const cachePolicySchema = z
  .object({
    /** max-age: honour s-maxage/max-age then revalidate; revalidate: always revalidate;
     *  ttl: fixed TTL (validator-less upstreams); rfc9111: standard shared cache; none: pass through. */
    policy: z.enum(['max-age', 'revalidate', 'ttl', 'rfc9111', 'none']).default('max-age'),
    /** Fixed freshness for policy "ttl". */
    ttl_seconds: z.number().int().positive().optional(),
    /** Upper bound on the freshness the upstream grants (max-age and rfc9111). */
    max_age_cap_seconds: z.number().int().min(0).optional(),
    /** How long past freshness an entry may be served when the upstream fails. */
    stale_if_error_seconds: z.number().int().min(0).default(86_400),
    /** Serve a stale entry at once and revalidate in the background, for this long past freshness (0: off). */
    stale_while_revalidate_seconds: z.number().int().min(0).default(0),
    /** rfc9111 heuristic freshness as a fraction of (Date - Last-Modified); 0 leaves it off. */
    heuristic_fraction: z.number().min(0).max(1).default(0),
  })
  .strict()
  .superRefine((v, ctx) => {
    if (v.policy === 'ttl' && v.ttl_seconds === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ttl_seconds'], message: 'is required when policy is "ttl"' });
    }
  });

export const upstreamSchema = z
  .object({
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be lowercase letters, digits, "-" or "_" (used as a metric label)'),
    /** Path prefix on the proxy that selects this upstream; the longest matching prefix wins. */
    prefix: z
      .string()
      .regex(/^\/[^?#\s]*$/, 'must start with "/" and contain no query, fragment or space')
      .transform((p) => (p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p)),
    url: httpUrl,
    /** Remove the prefix before forwarding (off: the path is forwarded as received). */
    strip_prefix: z.boolean().default(false),
    /** Forward methods other than GET and HEAD (through http-proxy-3) instead of answering 405. */
    pass_through: z.boolean().default(false),
    /** Maximum open connections to this upstream. */
    connections: z.number().int().min(1).max(1024).default(64),
    timeouts: z
      .object({
        connect_ms: z.number().int().positive().default(5_000),
        headers_ms: z.number().int().positive().default(30_000),
        body_ms: z.number().int().positive().default(30_000),
      })
      .strict()
      .prefault({}),
    cache: cachePolicySchema.prefault({}),
  })
  .strict();

export const configSchema = z
  .object({
    listen: z.object({ host: host.default('0.0.0.0'), port: port.default(8080) }).strict().prefault({}),
    admin: z.object({ host: host.default('127.0.0.1'), port: port.default(9090) }).strict().prefault({}),
    /** The proxy's address as clients see it (used to rewrite Link headers). */
    public_url: httpUrl.nullable().default(null),
    /** Trust X-Forwarded-Host/-Proto to build the public URL when public_url is unset. */
    trust_forwarded: z.boolean().default(false),
    redis: z.object({ url: z.string().min(1).nullable().default(null) }).strict().prefault({}),
    cache: z
      .object({
        /** Bound of the in-process (L1) cache, in bytes. */
        max_bytes: z.number().int().min(1024).default(256 * 1024 * 1024),
        /** Larger bodies stream through uncached. */
        max_entry_bytes: z.number().int().min(1).default(4 * 1024 * 1024),
        /** HMAC secret that turns credentials into cache partitions; random per process when unset. */
        partition_secret: z.string().min(16).nullable().default(null),
      })
      .strict()
      .prefault({}),
    /** Pool tokens. Never logged or exported. Usually given through ETAGERE_TOKENS. */
    tokens: z.array(z.string().min(1)).default([]),
    log: z.object({ level: z.enum(LOG_LEVELS).default('info') }).strict().prefault({}),
    shutdown: z.object({ drain_timeout_ms: z.number().int().positive().default(10_000) }).strict().prefault({}),
    upstreams: z
      .array(upstreamSchema)
      .min(1, 'at least one upstream is required')
      .superRefine((list, ctx) => {
        const seen = new Map<string, number>();
        list.forEach((u, i) => {
          if (seen.has(u.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `duplicate upstream name "${u.name}"` });
          seen.set(u.name, i);
        });
        const prefixes = new Map<string, number>();
        list.forEach((u, i) => {
          if (prefixes.has(u.prefix)) ctx.addIssue({ code: 'custom', path: [i, 'prefix'], message: `duplicate prefix "${u.prefix}"` });
          prefixes.set(u.prefix, i);
        });
      }),
  })
  .strict();

export type Config = z.infer<typeof configSchema>;
export type UpstreamConfig = z.infer<typeof upstreamSchema>;
export type CachePolicyConfig = z.infer<typeof cachePolicySchema>;
