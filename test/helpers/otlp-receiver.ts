/**
 * An OTLP/HTTP traces receiver on loopback: what @opentelemetry/exporter-trace-otlp-http sends
 * (POST /v1/traces, the JSON encoding), decoded into spans. Every body it receives goes to the
 * secrets scan's captures (test/helpers/capture.ts): exported spans are an output channel too.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { capture, inTestFile } from './capture.js';

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

/** One received span, its attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** The base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT): spans arrive at its /v1/traces. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Export requests received (bodies), including ones that held no span. */
  readonly posts: number;
  close(): Promise<void>;
}

function plain(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.boolValue !== undefined) return value.boolValue;
  return value.doubleValue ?? '';
}

function attributes(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) out[key] = plain(value);
  return out;
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: KeyValue[];
        status?: { code?: number };
      }>;
    }>;
  }>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let posts = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      posts++;
      capture(`OTLP receiver: exported spans${inTestFile()}`, text);
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(text) as ExportRequest;
      for (const group of body.resourceSpans ?? []) {
        const resource = attributes(group.resource?.attributes);
        for (const scope of group.scopeSpans ?? [])
          for (const span of scope.spans ?? [])
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === '' ? undefined : span.parentSpanId,
              name: span.name,
              kind: span.kind,
              attributes: attributes(span.attributes),
              statusCode: span.status?.code ?? 0,
              resource,
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    get posts() {
      return posts;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
