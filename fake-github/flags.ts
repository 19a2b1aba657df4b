/**
 * The command-line flags of `etagere fake-upstream` and the options they set: no dependency, so its
 * help text loads nothing of the fake.
 */
export const fakeUpstreamFlags = [
  { flag: '--port', option: 'port', description: 'port to listen on (CLI default 9100; 0 = random)' },
  { flag: '--host', option: 'host', description: 'address to listen on (default 127.0.0.1)' },
  { flag: '--tokens', option: 'tokens', description: 'token set, e.g. "tok1@alice:repo+read:org,tok2:" (parseTokenSpec)' },
  { flag: '--anon-limit', option: 'anonymousLimit', description: 'anonymous requests per window (default 60)' },
  { flag: '--token-limit', option: 'tokenLimit', description: 'requests per window per token (default 5000)' },
  { flag: '--window-seconds', option: 'windowSeconds', description: 'quota window length (default 3600)' },
  { flag: '--latency-ms', option: 'latencyMs', description: 'delay before each response (default 0)' },
  {
    flag: '--faults',
    option: 'faults',
    description: 'fault rules at start-up, "kind:rate,...", e.g. "reset-body:0.05,status:0.02" (parseFaultSpec)',
  },
  {
    flag: '--app',
    option: 'apps',
    description: 'a GitHub App, "ID[/SLUG]:KEY_FILE:INST[@ACCOUNT][=LIMIT]+...", e.g. "123456:app.pem:1001@etagere-org" (repeatable)',
  },
  {
    flag: '--installation-token-seconds',
    option: 'installationTokenSeconds',
    description: 'lifetime of an App installation token (default 3600)',
  },
  { flag: '--base-path', option: 'basePath', description: 'serve the API under this path, as GitHub Enterprise Server (e.g. /api/v3)' },
  {
    flag: '--no-rate-limits',
    option: 'rateLimits',
    description: 'no primary rate limits, as GitHub Enterprise Server by default (/rate_limit 404, no x-ratelimit-*)',
  },
  {
    flag: '--webhook-url',
    option: 'webhookUrl',
    description: "POST signed webhooks for the fake's changes here (e.g. a proxy's receiver)",
  },
  { flag: '--webhook-secret', option: 'webhookSecret', description: "the webhooks' secret (X-Hub-Signature-256)" },
] as const;
