/**
 * The configuration schema: the one description of every setting, its type and its default.
 * Keys are snake_case as they appear in YAML. `loadConfig` (load.ts) applies environment
 * overrides before validating, so an invalid value from either source is reported by key.
 */
import { z } from 'zod';
import { AppKeyError, appPrivateKey } from './app-jwt.js';
import { isLoopbackAddress, secureOrLoopbackUrl } from '../host.js';
import { tokenName } from './token-name.js';
import { globProblem } from './path-glob.js';

const port = z.number().int().min(0).max(65535);
/** What `workers` (WORKERS) takes, said whatever is wrong with it. */
const WORKERS = 'must be a whole number from 1 to 256, or "auto" (one per CPU)';
const host = z.string().min(1);
const httpUrl = z
  .string()
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'must be an http:// or https:// URL');

/**
 * The proxy's base URL as clients see it: written into every rewritten Link, Location and body
 * address, so it may carry no user, password, query or fragment (messages never repeat it).
 */
const publicUrl = httpUrl.superRefine((url, ctx) => {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return; // url() has said so
  }
  if (parsed.username !== '' || parsed.password !== '')
    ctx.addIssue({
      code: 'custom',
      message: 'must not carry a user or password: it is written into every link clients get (value not shown)',
    });
  else if (parsed.search !== '' || parsed.hash !== '')
    ctx.addIssue({ code: 'custom', message: 'must be a base URL without a query or fragment (value not shown)' });
});

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** How responses of one upstream are cached. The rules live in src/cache/rules/policy.ts. */
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
    /** Request `Cache-Control: no-cache` / `Pragma: no-cache` (which Node's fetch adds to every
     *  conditional request): honour, ignore, or ignore only on a conditional request. Unset:
     *  conditional, except under rfc9111 (honor). */
    client_no_cache: z.enum(['honor', 'ignore', 'conditional']).optional(),
    /** How an entry is revalidated once its pool token has a new value (re-minted, rotated): with the
     *  old value's ETag (a full 200 on GitHub), or with If-Modified-Since (src/cache/rules/entry.ts). */
    rotated_token_revalidation: z.enum(['etag', 'last_modified']).default('etag'),
    /** On the paths the webhooks cover (src/cache/rules/stale-marks.ts), entries stay fresh at least this long (0: off). */
    webhook_fresh_seconds: z.number().int().min(0).max(86_400).default(0),
    /** Revalidate an entry read during its freshness lifetime in the background shortly before it expires (src/cache/rules/refresh-ahead.ts). */
    refresh_ahead: z.boolean().default(false),
    /** A 404 or 410 to a GET is stored this long under the GitHub policies (src/cache/rules/classify.ts); 0: never. */
    negative_seconds: z.number().int().min(0).max(86_400).default(60),
  })
  .strict()
  .superRefine((cache, ctx) => {
    if (cache.policy === 'ttl' && cache.ttl_seconds === undefined) {
      ctx.addIssue({ code: 'custom', path: ['ttl_seconds'], message: 'is required when policy is "ttl"' });
    }
    if (cache.webhook_fresh_seconds > 0 && cache.policy !== 'max-age' && cache.policy !== 'ttl') {
      ctx.addIssue({
        code: 'custom',
        path: ['webhook_fresh_seconds'],
        message: `needs policy "max-age" or "ttl" (policy "${cache.policy}" decides freshness by other rules)`,
      });
    }
  });

export const upstreamSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be lowercase letters, digits, "-" or "_" (used as a metric label)'),
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
    /**
     * Retries in transit of a GET or HEAD (connection reset, refused or timed out before any byte;
     * 502/503/504 without Retry-After), within a budget of a tenth of recent requests. 0: none.
     */
    retries: z.number().int().min(0).max(5).default(1),
    cache: cachePolicySchema.prefault({}),
    /** Extra route templates for metric labels (`/things/:id`, a final `*`), tried before the built-in GitHub ones. */
    routes: z.array(z.string().regex(/^\/[^?#\s]*$/, 'must be a path template such as /things/:id')).default([]),
    /** Attach a pool token to requests that carry no credential of their own (GitHub-like upstreams). */
    token_pool: z.boolean().default(false),
    /** Point the upstream's API addresses inside JSON bodies (`url`, `repos_url`, ...) at the proxy.
     *  Unset: on for token_pool upstreams (GitHub-like APIs whose clients navigate by them), off otherwise. */
    rewrite_body_urls: z.boolean().optional(),
    /**
     * GitHub's GraphQL API through the proxy (src/paths/graphql/): POST <route>/graphql (on Enterprise
     * Server /api/graphql upstream); pooled consumers may run queries only.
     */
    graphql: z.boolean().default(false),
    /** GraphQL query answers cached for this long (src/paths/graphql/); unset: 60 with graphql: true, else 0 (off). */
    graphql_cache_seconds: z.number().int().min(0).max(3600).optional(),
  })
  .strict()
  .superRefine((upstream, ctx) => {
    if (upstream.graphql_cache_seconds !== undefined && upstream.graphql_cache_seconds > 0 && !upstream.graphql)
      ctx.addIssue({ code: 'custom', path: ['graphql_cache_seconds'], message: 'needs graphql: true' });
  })
  .transform((upstream) => ({ ...upstream, graphql_cache_seconds: upstream.graphql_cache_seconds ?? (upstream.graphql ? 60 : 0) }));

/** A name shown in logs, metrics and /admin: never the secret it stands for. */
const secretName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'must be 1-63 letters, digits, ".", "_" or "-"');

/**
 * A secret (pool token or consumer key) after load.ts resolved `env:` references and files.
 * The value is printable ASCII without spaces; messages never repeat it.
 */
export const secretSchema = z
  .object({
    name: secretName.optional(),
    value: z.string().regex(/^[\x21-\x7e]{1,1024}$/, 'must be 1-1024 printable characters without spaces (value not shown)'),
  })
  .strict();

/** Whether a token name is how an installation of GitHub App `app` is named (`<app>-<installation id>`). */
const installationName = (name: string, app: string): boolean => name.startsWith(`${app}-`) && /^\d+$/.test(name.slice(app.length + 1));

/** Whether a text is an RSA private key in PEM form (never quoted in a message). */
function isAppKey(pem: string): boolean {
  try {
    appPrivateKey(pem);
    return true;
  } catch (err) {
    if (err instanceof AppKeyError) return false;
    throw err;
  }
}

/**
 * A GitHub App whose installations' tokens are pool members, named `<name>-<installation id>`
 * (src/pool/members/app-source.ts keeps them minted and refreshed; src/pool/members/app-members.ts makes them
 * pool members). The loader (load.ts) reads the key from `private_key_file` or `private_key_env`
 * into `private_key` and checks it is an RSA private key. The pool rules (an upstream with
 * token_pool, consumer keys off loopback) count the Apps like tokens.
 */
export const appSchema = z
  .object({
    /** Label in logs, metrics and /admin; members are `<name>-<installation id>`. */
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$/, 'must be 1-40 letters, digits, ".", "_" or "-"'),
    /** The App's id (its settings page; GET /app). */
    app_id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
    /** A file with the App's private key (PEM), read at start. */
    private_key_file: z.string().min(1).optional(),
    /** An environment variable holding the App's private key (PEM text), read at start. */
    private_key_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable')
      .optional(),
    /** The PEM text itself: set by the loader from private_key_file or private_key_env; never write it in a file. */
    private_key: z.string().refine(isAppKey, 'is not an RSA private key in PEM form (content not shown)').optional(),
    /** `all`: every installation of the App (listed again every few minutes); or a list of installation ids. */
    installations: z
      .union([z.literal('all'), z.array(z.number().int().min(1).max(Number.MAX_SAFE_INTEGER)).min(1, 'give at least one id, or "all"')], {
        error: 'must be "all" or a list of installation ids (whole numbers)',
      })
      .default('all'),
  })
  .strict()
  .superRefine((app, ctx) => {
    if (app.private_key === undefined) {
      ctx.addIssue({ code: 'custom', path: ['private_key_file'], message: 'give private_key_file or private_key_env' });
    }
    if (Array.isArray(app.installations) && new Set(app.installations).size !== app.installations.length) {
      ctx.addIssue({ code: 'custom', path: ['installations'], message: 'an installation id is listed twice' });
    }
  });

export const poolSchema = z
  .object({
    /** Pool tokens: { name?, value } or { name?, env } (resolved at load). Usually ETAGERE_TOKENS. */
    tokens: z.array(secretSchema).default([]),
    /** A file with one token per line ("name=token" allowed; "#" comments). Usually ETAGERE_TOKENS_FILE. */
    tokens_file: z.string().min(1).nullable().default(null),
    /** GitHub Apps whose installation tokens join the pool (appSchema; the ETAGERE_APP_* shortcut defines one). */
    apps: z.array(appSchema).default([]),
    /** Pool tokens with the same scopes share one cache partition; false gives each its own. */
    equivalent: z.boolean().default(true),
    /** Requests in flight on one token at once. */
    per_token_concurrency: z.number().int().min(1).max(1000).default(10),
    /** Requests in flight on pool tokens at once, all tokens together (GitHub allows 100). */
    max_concurrency: z.number().int().min(1).max(10_000).default(90),
    /**
     * Secondary-limit points each token may spend in any minute on REST (GitHub: 900; a GET costs 1,
     * a write 5), and at most a sixth of it plus one in any 10 s (src/pool/rules/choose.ts).
     */
    points_per_minute: z.number().int().min(1).max(1_000_000).default(900),
    /** The same for GraphQL calls (GitHub: 2,000 a minute; a query costs 1). */
    graphql_points_per_minute: z.number().int().min(1).max(1_000_000).default(2000),
    /** How long a request may wait for a free slot before it is answered 503. */
    queue_timeout_ms: z.number().int().min(0).max(600_000).default(10_000),
    /**
     * How many requests may wait for a slot at once; beyond that they are answered 503 at once. With
     * consumer keys, split by weight: each consumer's own bound (src/pool/rules/fair-share.ts queueBounds).
     */
    max_queue: z.number().int().min(0).max(1_000_000).default(10_000),
    /** Ask GET /rate_limit for each token at start-up (free on GitHub). */
    probe_at_start: z.boolean().default(true),
    /**
     * How often dead tokens (a 401 confirmed by GET /rate_limit) are probed again; one that answers
     * comes back. The shared dead flag in Redis expires after 15 minutes unless a probe renews it.
     */
    revive_interval_ms: z.number().int().min(100).max(86_400_000).default(300_000),
    /**
     * Serve the pool without consumer keys on a non-loopback listen.host, on purpose. Without it
     * such a config refuses to start: anyone who reaches the port would spend the pool.
     */
    open: z.boolean().default(false),
  })
  .strict();

/** An HTTP method a scope rule allows. */
const ruleMethod = z
  .string()
  .transform((method) => method.toUpperCase())
  .pipe(z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']));

/**
 * One `allow` rule of a consumer scope (src/pool/rules/allow.ts): globs over the GitHub API path
 * and the methods it allows. `placeholders`: `${claim}` segments (OIDC issuers only).
 */
const allowRuleSchema = (placeholders: boolean) =>
  z
    .object({
      paths: z
        .array(
          z.string().superRefine((glob, ctx) => {
            const problem = globProblem(glob, placeholders);
            if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `"${glob.slice(0, 200)}" ${problem}` });
          }),
        )
        .min(1, 'give at least one path glob'),
      methods: z.array(ruleMethod).min(1).default(['GET', 'HEAD']),
    })
    .strict();

/** One consumer key, its fair-share weight and its optional caps (src/pool/rules/fair-share.ts). */
export const consumerKeySchema = secretSchema
  .extend({
    name: secretName,
    /** The key; unset when consumers.keys_file gives this consumer's keys. */
    value: secretSchema.shape.value.optional(),
    /** Its share of the pool's quota is weight / (sum of the weights), per resource and window. */
    weight: z.number().min(0.001).max(1000).default(1),
    /** At most this many upstream requests on the pool per clock hour (every resource); null: no cap. */
    max_per_hour: z.number().int().min(0).max(100_000_000).nullable().default(null),
    /** At most this many of its requests in flight on the pool at once (the others wait); null: no cap. */
    max_concurrency: z.number().int().min(1).max(10_000).nullable().default(null),
    /** What the key may use: path globs and methods (src/pool/rules/allow.ts); unset: everything. */
    allow: z.array(allowRuleSchema(false)).min(1, 'give at least one rule, or leave allow out for full access').optional(),
  })
  .strict();

/** A JWT claim's name (a name claim, a placeholder, a required claim). */
const claimName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'must be a claim name: letters, digits and "_"');
/** An issuer or JWKS address: https, or http on a loopback host only. */
const keyUrl = z.string().max(2048).refine(secureOrLoopbackUrl, 'must be an https URL (http only on a loopback host)');

/** A trusted OIDC issuer: its tokens are consumer identities (src/pool/consumers/oidc.ts). */
export const oidcIssuerSchema = z
  .object({
    /** Its fair-share account and label; unique among consumer names. */
    name: secretName,
    /** The `iss` its tokens carry, exactly (e.g. https://token.actions.githubusercontent.com). */
    issuer: keyUrl,
    /** The `aud` a token must carry. */
    audience: z.string().min(1).max(256),
    /** Its JWKS; unset: found through the issuer's /.well-known/openid-configuration. */
    jwks_url: keyUrl.nullable().default(null),
    /** The claim whose value names the consumer (GitHub Actions: repository; Kubernetes: sub). */
    name_claim: claimName,
    /** What its tokens may use; `${claim}` segments are filled from the token. */
    allow: z.array(allowRuleSchema(true)).min(1, 'give at least one rule'),
    /** Claims a token must carry with one of the values listed (e.g. repository_owner: your organisation). */
    required_claims: z.array(z.object({ claim: claimName, values: z.array(z.string().min(1).max(256)).min(1) }).strict()).default([]),
    /** Its share of the pool, like a key's weight: all its tokens share it. */
    weight: z.number().min(0.001).max(1000).default(1),
    /** Distinct consumer names per process that label metrics; later ones count as "<name>:other". */
    max_names: z.number().int().min(1).max(10_000).default(100),
  })
  .strict();

export const consumersSchema = z
  .object({
    /** When true, only requests with a known consumer key may use the token pool. */
    enabled: z.boolean().default(false),
    /** Consumer keys: { name, value } or { name, env }. Sent in any credential position (src/pool/consumers/consumers.ts). */
    keys: z.array(consumerKeySchema).default([]),
    /**
     * A file of `name=key` lines giving the keys of consumers listed in `keys` (several per consumer
     * allowed), reloaded when it changes or on SIGHUP (src/platform/config/keys-file.ts).
     */
    keys_file: z.string().min(1).nullable().default(null),
    /** Trusted OIDC issuers: a token of one is a consumer credential like a key (src/pool/consumers/oidc.ts). */
    oidc: z.array(oidcIssuerSchema).default([]),
    /** What a request without a known key gets: a 401 (reject) or plain anonymous upstream access. */
    unknown: z.enum(['reject', 'anonymous']).default('reject'),
    /** The part of each consumer's share that is never lent to other consumers (src/pool/rules/fair-share.ts). */
    reserve_fraction: z.number().min(0).max(1).default(0.5),
  })
  .strict();

/** An account login as GitHub spells them (organizations and users), or "*" for every account. */
const accountLogin = z.string().regex(/^(?:\*|[A-Za-z0-9][A-Za-z0-9_.-]{0,99})$/, 'must be an account login, or "*" for every account');

/**
 * The webhook receiver (src/paths/webhooks/): GitHub's deliveries mark cached paths stale. Off until a
 * secret is configured (webhooks.secret, webhooks.secret_file, ETAGERE_WEBHOOK_SECRET, read by load.ts).
 */
export const webhooksSchema = z
  .object({
    /** Where GitHub POSTs, on the public port; served before any upstream route. */
    path: z
      .string()
      .regex(/^\/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]$/, 'must be a path such as /_etagere/webhooks/github (no query, no trailing slash)')
      .default('/_etagere/webhooks/github'),
    /** The webhook's secret (X-Hub-Signature-256). Never logged; prefer ETAGERE_WEBHOOK_SECRET or secret_file. */
    secret: z
      .string()
      .regex(/^[^\x00-\x1f\x7f]{16,4096}$/, 'must be 16-4096 characters without control characters (value not shown)')
      .nullable()
      .default(null),
    /** A file holding the secret (read at start into `secret`; a trailing newline is dropped). */
    secret_file: z.string().min(1).nullable().default(null),
    /** Larger bodies get 413 (GitHub caps its payloads at 25 MB). */
    max_body_bytes: z.number().int().min(1024).max(26_214_400).default(26_214_400),
    /** A delivery's body must arrive whole within this long (and at a floor rate: src/paths/webhooks/pace.ts), else 408. */
    read_timeout_ms: z.number().int().min(1_000).max(60_000).default(10_000),
    /** The accounts whose deliveries reach the proxy: cache.webhook_fresh_seconds applies to their paths. */
    owners: z.array(accountLogin).default([]),
  })
  .strict();

/** OpenTelemetry's sampler names (OTEL_TRACES_SAMPLER). */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/**
 * Traces (src/platform/trace/): OpenTelemetry spans exported over OTLP/HTTP. Off until an endpoint
 * is set. Each key mirrors an OTEL_* variable, which wins over it (load.ts).
 */
export const tracingSchema = z
  .object({
    /** OTLP/HTTP base endpoint, e.g. http://127.0.0.1:4318 (spans go to its /v1/traces). */
    endpoint: httpUrl.nullable().default(null),
    /** The traces URL itself, used as it is (wins over endpoint). */
    traces_endpoint: httpUrl.nullable().default(null),
    /** The service.name resource attribute; unset: resource_attributes' service.name, else "etagere". */
    service_name: z.string().min(1).max(256).nullable().default(null),
    sampler: z.enum(SAMPLERS).default('parentbased_always_on'),
    /** The ratio of the traceidratio samplers, 0 to 1 (unset: 1). */
    sampler_arg: z.number().min(0, 'must be a ratio from 0 to 1').max(1, 'must be a ratio from 0 to 1').nullable().default(null),
    /** Resource attributes added to every span (e.g. deployment.environment.name). */
    resource_attributes: z
      .record(z.string().regex(/^[A-Za-z0-9_.-]{1,255}$/, 'must be an attribute name'), z.string().max(4096))
      .default({}),
  })
  .strict();

const hostPort = z.string().regex(/^[A-Za-z0-9.-]+:\d{1,5}$/, 'must be host:port');

/** Redis (optional): the shared L2 cache, token budget and single flight of several replicas. */
export const redisSchema = z
  .object({
    /** A single Redis, e.g. redis://127.0.0.1:6379/0 (REDIS_URL). */
    url: z
      .string()
      .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
      .nullable()
      .default(null),
    /** A Redis Cluster instead: seed nodes as host:port (REDIS_CLUSTER_NODES, comma-separated). */
    cluster: z.array(hostPort).min(1).nullable().default(null),
    /** Every key starts with this, then the schema version. */
    key_prefix: z
      .string()
      .regex(/^[A-Za-z0-9:_.-]{1,64}$/, 'must be 1-64 letters, digits, ":", "_", "." or "-"')
      .default('etagere:'),
    /** When true, /readyz reports not ready while Redis is unreachable. */
    required: z.boolean().default(false),
    /** Per-command timeout: a slow Redis counts as a miss (or a skipped write) after this. */
    command_timeout_ms: z.number().int().min(5).max(10_000).default(100),
    /**
     * How long a client request waits for its L2 lookup before going on without Redis (as on a
     * miss); the command itself may run on up to command_timeout_ms, and its outcome still counts.
     * While Redis has been slow (4x its recent latency is more) the request waits that long, up to
     * command_timeout_ms (src/platform/redis/connection.ts).
     */
    lookup_timeout_ms: z.number().int().min(1).max(10_000).default(20),
    connect_timeout_ms: z.number().int().min(10).max(60_000).default(1_000),
    /** After this many failures in a row Redis is skipped for `breaker_open_ms`. */
    breaker_failures: z.number().int().min(1).max(1_000).default(3),
    breaker_open_ms: z.number().int().min(10).max(600_000).default(1_000),
    /** Distributed single flight: lock lifetime, and how long other replicas wait for the winner. */
    lock_ms: z.number().int().min(100).max(120_000).default(10_000),
    wait_ms: z.number().int().min(0).max(120_000).default(5_000),
    /** Share the token pool's budget (remaining, reservations, pauses, dead tokens) through Redis. */
    shared_tokens: z.boolean().default(true),
  })
  .strict()
  .superRefine((redis, ctx) => {
    if (redis.url !== null && redis.cluster !== null)
      ctx.addIssue({ code: 'custom', path: ['cluster'], message: 'give either url or cluster, not both' });
  });

export const configSchema = z
  .object({
    listen: z
      .object({
        host: host.default('127.0.0.1'),
        port: port.default(8080),
        /** Serve HTTPS with this certificate (PEM, chain allowed) and key (PEM); reloaded on SIGHUP and when the files change. */
        tls: z
          .object({ cert_file: z.string().min(1).optional(), key_file: z.string().min(1).optional() })
          .strict()
          .superRefine((tls, ctx) => {
            for (const [given, missing] of [
              ['cert_file', 'key_file'],
              ['key_file', 'cert_file'],
            ] as const)
              if (tls[given] !== undefined && tls[missing] === undefined)
                ctx.addIssue({ code: 'custom', path: [missing], message: `required with listen.tls.${given}: give both or neither` });
          })
          .transform((tls) =>
            tls.cert_file === undefined || tls.key_file === undefined ? null : { cert_file: tls.cert_file, key_file: tls.key_file },
          )
          .nullable()
          .default(null),
      })
      .strict()
      .prefault({}),
    admin: z
      .object({
        host: host.default('127.0.0.1'),
        port: port.default(9090),
        /** Host header names (or addresses) the admin port answers besides 127.0.0.1, localhost and [::1], with any port. */
        allowed_hosts: z
          .array(
            z.string().regex(/^(?:[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]+\])$/, 'must be a host name or address, without port'),
          )
          .default([]),
        /**
         * The bearer token every /admin/* call must send (`Authorization: Bearer`); /, /healthz,
         * /readyz and /metrics stay open. Required when admin.host is not a loopback address.
         */
        token: z
          .string()
          .regex(/^[\x21-\x7e]{16,1024}$/, 'must be 16-1024 printable characters without spaces (value not shown)')
          .nullable()
          .default(null),
        /** Serve /admin/* without a token on a non-loopback admin.host, on purpose (as pool.open). */
        open: z.boolean().default(false),
      })
      .strict()
      .prefault({}),
    /** The proxy's address as clients see it (used to rewrite Link headers). */
    public_url: publicUrl.nullable().default(null),
    /** Trust X-Forwarded-Host/-Proto to build the public URL when public_url is unset. */
    trust_forwarded: z.boolean().default(false),
    redis: redisSchema.prefault({}),
    cache: z
      .object({
        /** The in-process (L1) cache; false leaves only the shared L2 (measurement, or scarce memory). */
        l1: z.boolean().default(true),
        /** Bound of the in-process (L1) cache, in bytes. */
        max_bytes: z
          .number()
          .int()
          .min(1024)
          .default(256 * 1024 * 1024),
        /** Larger bodies stream through uncached. */
        max_entry_bytes: z
          .number()
          .int()
          .min(1)
          .default(4 * 1024 * 1024),
        /** A gzip entry decoding to more is never decoded whole on the event loop (streamed instead); unset: max_entry_bytes. */
        max_decoded_bytes: z.number().int().min(1).optional(),
        /** HMAC secret that turns credentials into cache partitions; random per process when unset. */
        partition_secret: z.string().min(16).nullable().default(null),
      })
      .strict()
      .prefault({}),
    /** The token pool. Token values are never logged or exported. */
    pool: poolSchema.prefault({}),
    consumers: consumersSchema.prefault({}),
    webhooks: webhooksSchema.prefault({}),
    tracing: tracingSchema.prefault({}),
    log: z
      .object({
        level: z.enum(LOG_LEVELS).default('info'),
        /** Which requests get an access line: all, misses (every request but a fresh cache hit), or sampled (misses, and hits at access_ratio). */
        access: z.enum(['all', 'misses', 'sampled']).default('all'),
        /** Under `access: sampled`, the share of fresh hits that get a line (0.01: one in a hundred). */
        access_ratio: z.number().gt(0).lte(1).default(0.01),
      })
      .strict()
      .prefault({}),
    metrics: z
      .object({
        /** Who a request counts for in the per-consumer metrics and /admin/quota; unset: key with consumer keys on, else none. */
        consumer_label: z.enum(['key', 'user_agent', 'none']).optional(),
      })
      .strict()
      .prefault({}),
    /** Processes serving requests: 1, a number, or "auto" (one per CPU). See src/main/cluster.ts. */
    workers: z.union([z.literal('auto'), z.number().int(WORKERS).min(1, WORKERS).max(256, WORKERS)], { error: WORKERS }).default(1),
    shutdown: z
      .object({ drain_timeout_ms: z.number().int().positive().default(10_000) })
      .strict()
      .prefault({}),
    upstreams: z
      .array(upstreamSchema)
      .min(1, 'at least one upstream is required')
      .superRefine((list, ctx) => {
        const seen = new Map<string, number>();
        list.forEach((upstream, index) => {
          if (seen.has(upstream.name))
            ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `duplicate upstream name "${upstream.name}"` });
          seen.set(upstream.name, index);
        });
        const prefixes = new Map<string, number>();
        list.forEach((upstream, index) => {
          if (prefixes.has(upstream.prefix))
            ctx.addIssue({ code: 'custom', path: [index, 'prefix'], message: `duplicate prefix "${upstream.prefix}"` });
          prefixes.set(upstream.prefix, index);
        });
      }),
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.pool.tokens.length > 0 && !config.upstreams.some((u) => u.token_pool)) {
      ctx.addIssue({ code: 'custom', path: ['pool', 'tokens'], message: 'tokens are configured but no upstream has token_pool: true' });
    }
    if (config.pool.apps.length > 0 && !config.upstreams.some((u) => u.token_pool)) {
      ctx.addIssue({ code: 'custom', path: ['pool', 'apps'], message: 'GitHub Apps are configured but no upstream has token_pool: true' });
    }
    const appNames = new Set<string>();
    config.pool.apps.forEach((app, index) => {
      if (appNames.has(app.name))
        ctx.addIssue({ code: 'custom', path: ['pool', 'apps', index, 'name'], message: `duplicate App name "${app.name}"` });
      appNames.add(app.name);
    });
    if (config.consumers.enabled && config.consumers.keys.length === 0 && config.consumers.oidc.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['consumers', 'keys'], message: 'consumers.enabled needs at least one key or OIDC issuer' });
    }
    const pooled = config.pool.tokens.length > 0 || config.pool.apps.length > 0;
    if (pooled && !config.consumers.enabled && !config.pool.open && !isLoopbackAddress(config.listen.host)) {
      ctx.addIssue({
        code: 'custom',
        path: ['listen', 'host'],
        message:
          `is ${config.listen.host}, not a loopback address, and consumer keys are off: anyone who reaches the port would spend the token pool. ` +
          'Turn on consumer keys (consumers.enabled), listen on loopback (HOST=127.0.0.1), or set pool.open: true to serve the pool openly on purpose',
      });
    }
    if (config.admin.token === null && !config.admin.open && !isLoopbackAddress(config.admin.host)) {
      ctx.addIssue({
        code: 'custom',
        path: ['admin', 'token'],
        message:
          `is not set and admin.host is ${config.admin.host}, not a loopback address: anyone who reaches the admin port could read cached bodies and purge. ` +
          'Set admin.token (ETAGERE_ADMIN_TOKEN), listen on loopback (ADMIN_HOST=127.0.0.1), or set admin.open: true to serve it openly on purpose',
      });
    }
    const tokenNames = new Map<string, number>();
    const tokenValues = new Map<string, number>();
    config.pool.tokens.forEach((token, index) => {
      const sameValueAt = tokenValues.get(token.value);
      if (sameValueAt !== undefined)
        ctx.addIssue({ code: 'custom', path: ['pool', 'tokens', index], message: `the same token as pool.tokens[${sameValueAt}]` });
      tokenValues.set(token.value, index);
      const name = tokenName(token.value, token.name);
      const sameNameAt = tokenNames.get(name);
      if (sameNameAt !== undefined && sameValueAt === undefined)
        ctx.addIssue({ code: 'custom', path: ['pool', 'tokens', index, 'name'], message: `duplicate token name "${name}"` });
      tokenNames.set(name, index);
    });
    // A token named like an installation member ("<app>-<id>") would hide that installation.
    config.pool.tokens.forEach((token, index) => {
      const name = token.name;
      const app = name === undefined ? undefined : config.pool.apps.find((candidate) => installationName(name, candidate.name));
      if (app !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['pool', 'tokens', index, 'name'],
          message: `"${name}" is how GitHub App ${app.name}'s installations are named (${app.name}-<installation id>): name the token otherwise`,
        });
    });
    checkWebhookFreshness(config, ctx);
    const names = new Set<string>();
    config.consumers.keys.forEach((key, index) => {
      if (key.value === undefined && config.consumers.keys_file === null)
        ctx.addIssue({
          code: 'custom',
          path: ['consumers', 'keys', index, 'value'],
          message: `consumer "${key.name}" has no key: give value or env, or set consumers.keys_file with a line "${key.name}=<key>"`,
        });
      if (names.has(key.name))
        ctx.addIssue({ code: 'custom', path: ['consumers', 'keys', index, 'name'], message: `duplicate consumer name "${key.name}"` });
      names.add(key.name);
    });
    const issuers = new Set<string>();
    config.consumers.oidc.forEach((issuer, index) => {
      if (names.has(issuer.name))
        ctx.addIssue({ code: 'custom', path: ['consumers', 'oidc', index, 'name'], message: `duplicate consumer name "${issuer.name}"` });
      if (issuers.has(issuer.issuer))
        ctx.addIssue({ code: 'custom', path: ['consumers', 'oidc', index, 'issuer'], message: 'this issuer is listed twice' });
      names.add(issuer.name);
      issuers.add(issuer.issuer);
    });
  });

/** cache.webhook_fresh_seconds needs the receiver and the accounts it hears from. */
function checkWebhookFreshness(
  config: { upstreams: ReadonlyArray<{ cache: { webhook_fresh_seconds: number } }>; webhooks: z.infer<typeof webhooksSchema> },
  ctx: z.RefinementCtx,
): void {
  const fresh = config.upstreams.findIndex((upstream) => upstream.cache.webhook_fresh_seconds > 0);
  if (fresh === -1) return;
  if (config.webhooks.secret === null)
    ctx.addIssue({
      code: 'custom',
      path: ['upstreams', fresh, 'cache', 'webhook_fresh_seconds'],
      message: 'needs the webhook receiver: set webhooks.secret_file or ETAGERE_WEBHOOK_SECRET (or webhooks.secret)',
    });
  if (config.webhooks.owners.length === 0)
    ctx.addIssue({
      code: 'custom',
      path: ['webhooks', 'owners'],
      message:
        'name the accounts whose webhooks reach the proxy ("*" for every account): cache.webhook_fresh_seconds applies to their paths only',
    });
}

export type Config = z.infer<typeof configSchema>;
export type RedisConfig = z.infer<typeof redisSchema>;
export type ConsumerKeyConfig = z.infer<typeof consumerKeySchema>;
export type OidcIssuerConfig = z.infer<typeof oidcIssuerSchema>;
export type AppConfig = z.infer<typeof appSchema>;
export type UpstreamConfig = z.infer<typeof upstreamSchema>;
export type WebhooksConfig = z.infer<typeof webhooksSchema>;
export type TracingConfig = z.infer<typeof tracingSchema>;
