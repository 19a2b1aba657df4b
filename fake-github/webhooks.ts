/**
 * Webhooks from the fake, as GitHub sends them: when one is configured (`--webhook-url`,
 * `--webhook-secret`, or POST /__fake/webhooks), each change the fake makes to its data is
 * POSTed there, signed, with GitHub's headers:
 *
 *   Content-Type: application/json             X-GitHub-Event: <event>
 *   User-Agent: GitHub-Hookshot/<hex>           X-GitHub-Delivery: <GUID>
 *   X-GitHub-Hook-ID, X-GitHub-Hook-Installation-Target-ID, X-GitHub-Hook-Installation-Target-Type
 *   X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with the secret>   (and the legacy X-Hub-Signature: sha1=...)
 *
 * Deliveries go out asynchronously, after the change, one attempt each with GitHub's 10 s
 * timeout: GitHub does not retry a failed delivery by itself either. A delivery can be sent again
 * (`redeliver`), with the same GUID and body, as GitHub's "Redeliver" does. The last 100
 * deliveries are listed with the receiver's status (GET /__fake/webhooks). The secret is never shown.
 */
import { createHmac, randomUUID } from 'node:crypto';

export interface WebhookTarget {
  url: string;
  /** Signs with X-Hub-Signature-256 (and X-Hub-Signature) when set, as GitHub does. */
  secret: string | null;
}

export interface DeliveryRecord {
  id: string;
  event: string;
  action: string | null;
  /** The receiver's status; null while in flight or when it gave none (see error). */
  status: number | null;
  error: string | null;
  durationMs: number | null;
  deliveredAt: string;
  redelivery: boolean;
}

/** GitHub's own hook id for the fake's one webhook (an organization hook on the seed organization). */
export const FAKE_HOOK_ID = 424242;
const HOOKSHOT = 'GitHub-Hookshot/fa4e2c1';
const TIMEOUT_MS = 10_000;
const KEPT = 100;

interface Hook {
  targetId: number;
  targetType: 'organization' | 'repository' | 'integration';
}

interface Sent {
  record: DeliveryRecord;
  body: Buffer;
  hook: Hook;
}

export class WebhookSender {
  private target: WebhookTarget | null = null;
  /** The API base the payloads' addresses are on (the fake's URL plus its base path), once listening. */
  apiBase: () => string = () => '';
  private readonly sent = new Map<string, Sent>();
  /** Deliveries not answered yet (close() waits for none: they time out on their own). */
  private readonly inFlight = new Set<AbortController>();

  /** Where deliveries go; null turns them off. */
  configure(target: WebhookTarget | null): void {
    if (target !== null && !/^https?:\/\//i.test(target.url)) throw new RangeError('the webhook URL must be an http:// or https:// URL');
    this.target = target;
  }

  /** What GET /__fake/webhooks shows: the URL (never the secret) and the recent deliveries, newest last. */
  describe(): { url: string | null; secret: boolean; deliveries: DeliveryRecord[] } {
    return {
      url: this.target?.url ?? null,
      secret: this.target?.secret != null,
      deliveries: [...this.sent.values()].map((sent) => sent.record),
    };
  }

  /** Sends one event; returns its delivery GUID, or undefined when no webhook is configured. */
  send(event: string, payload: Record<string, unknown>, targetId: number, targetType: Hook['targetType']): string | undefined {
    if (this.target === null) return undefined;
    const id = randomUUID();
    const body = Buffer.from(JSON.stringify(payload));
    const action = typeof payload.action === 'string' ? payload.action : null;
    const hook: Hook = { targetId, targetType };
    const record = this.post(this.target, id, event, action, body, hook, false);
    this.sent.set(id, { record, body, hook });
    while (this.sent.size > KEPT) this.sent.delete(this.sent.keys().next().value!);
    return id;
  }

  /** Sends a recorded delivery again, same GUID and body; undefined when it is unknown or no webhook is configured. */
  redeliver(id: string): string | undefined {
    const known = this.sent.get(id);
    if (known === undefined || this.target === null) return undefined;
    const record = this.post(this.target, id, known.record.event, known.record.action, known.body, known.hook, true);
    this.sent.delete(id);
    this.sent.set(id, { ...known, record });
    return id;
  }

  forget(): void {
    this.sent.clear();
  }

  close(): void {
    for (const controller of this.inFlight) controller.abort();
    this.inFlight.clear();
  }

  private post(
    target: WebhookTarget,
    id: string,
    event: string,
    action: string | null,
    body: Buffer,
    hook: Hook,
    redelivery: boolean,
  ): DeliveryRecord {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': HOOKSHOT,
      'x-github-event': event,
      'x-github-delivery': id,
      'x-github-hook-id': String(FAKE_HOOK_ID),
      'x-github-hook-installation-target-id': String(hook.targetId),
      'x-github-hook-installation-target-type': hook.targetType,
    };
    if (target.secret !== null) {
      headers['x-hub-signature'] = `sha1=${createHmac('sha1', target.secret).update(body).digest('hex')}`;
      headers['x-hub-signature-256'] = `sha256=${createHmac('sha256', target.secret).update(body).digest('hex')}`;
    }
    const record: DeliveryRecord = {
      id,
      event,
      action,
      status: null,
      error: null,
      durationMs: null,
      deliveredAt: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      redelivery,
    };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
    this.inFlight.add(controller);
    const started = performance.now();
    fetch(target.url, { method: 'POST', headers, body, signal: controller.signal })
      .then(async (res) => {
        record.status = res.status;
        await res.arrayBuffer();
      })
      .catch((err: unknown) => {
        const cause = (err as { cause?: { message?: unknown } }).cause?.message;
        record.error = controller.signal.aborted ? 'timed out' : typeof cause === 'string' ? cause : (err as Error).message;
      })
      .finally(() => {
        clearTimeout(timer);
        this.inFlight.delete(controller);
        record.durationMs = Math.round(performance.now() - started);
      });
    return record;
  }
}
