/**
 * Pure: a delivery's payload from its body. GitHub sends it as JSON (content type
 * `application/json`) or as a form with one field, `payload` (`application/x-www-form-urlencoded`),
 * as the webhook's settings choose. Read only after the signature matched.
 */

export type Parsed = { ok: true; payload: Record<string, unknown> } | { ok: false; reason: string };

export function parsePayload(contentType: string | undefined, body: Buffer): Parsed {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  let text = body.toString('utf8');
  if (type === 'application/x-www-form-urlencoded') {
    const field = new URLSearchParams(text).get('payload');
    if (field === null) return { ok: false, reason: 'a form-encoded delivery needs a "payload" field' };
    text = field;
  } else if (type !== 'application/json' && !type.endsWith('+json')) {
    return { ok: false, reason: 'the content type must be application/json or application/x-www-form-urlencoded' };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'the payload is not valid JSON' };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { ok: false, reason: 'the payload must be a JSON object' };
  return { ok: true, payload: value as Record<string, unknown> };
}

/** The event's action (`opened`, `renamed`...), for the log line, when the payload names a plain one. */
export function actionOf(payload: Record<string, unknown>): string | undefined {
  const action = payload.action;
  return typeof action === 'string' && /^[a-z_]{1,64}$/.test(action) ? action : undefined;
}
