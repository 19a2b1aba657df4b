/**
 * The chunked JSON check (src/upstream/json-syntax.ts) says what `JSON.parse` of the bytes read as
 * UTF-8 says, wherever the chunks are cut: on valid texts, on near misses (one byte changed, added
 * or taken away), on texts made of JSON's own characters at random, and on raw bytes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonSyntax } from '../../src/upstream/json-syntax.js';

/** What JSON.parse says of the bytes. */
function parses(bytes: Buffer): boolean {
  try {
    JSON.parse(bytes.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** What the chunked check says of the bytes, cut at `cuts` (positions, any order, any range). */
function checks(bytes: Buffer, cuts: readonly number[] = []): boolean {
  const syntax = new JsonSyntax();
  const points = [...new Set(cuts.map((cut) => Math.abs(cut) % (bytes.length + 1)))].sort((left, right) => left - right);
  let from = 0;
  for (const point of [...points, bytes.length]) {
    syntax.write(bytes.subarray(from, point));
    from = point;
  }
  return syntax.valid && syntax.end();
}

const cuts = fc.array(fc.nat(), { maxLength: 6 });
/** JSON's own characters, a few others, and bytes that are not ASCII. */
const JSONISH = [...'{}[]",:\\/ \t\n\r0123456789-+.eEtruefalsnu', 'x', '\u0000', '\u001f', '\u007f', 'é', '\u2028', '\ufeff'];

describe('chunked JSON check', () => {
  it('accepts what JSON.parse accepts, and refuses what it refuses: known cases', () => {
    const cases = [
      '{}',
      '[]',
      '""',
      '0',
      '-0',
      '1.5e+10',
      '-12.25E-3',
      'true',
      'false',
      'null',
      ' \n{"a": [1, 2, {"b": null}], "c": "\\u00e9\\n"}\t',
      '',
      ' ',
      '{',
      '}',
      '[1,]',
      '{"a":1,}',
      '{"a" 1}',
      '{1:2}',
      '01',
      '1.',
      '.5',
      '1e',
      '-',
      '+1',
      'tru',
      'truex',
      'nul',
      '"\\x"',
      '"\\u12g4"',
      '"a\nb"',
      '"\u0001"',
      '[1 2]',
      '{"a":1}{}',
      '[][]',
      '"unterminated',
      '\ufeff{}',
      'NaN',
      '[-]',
      '{"a":}',
      '[,1]',
    ];
    for (const text of cases) {
      const bytes = Buffer.from(text);
      expect(checks(bytes), JSON.stringify(text)).toBe(parses(bytes));
      for (let cut = 0; cut <= bytes.length; cut++)
        expect(checks(bytes, [cut]), `${JSON.stringify(text)} cut at ${cut}`).toBe(parses(bytes));
    }
  });

  it('any JSON value, laid out any way, cut anywhere, is valid', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom(undefined, 1, '\t', ' \n '), cuts, (value, space, at) => {
        expect(checks(Buffer.from(JSON.stringify(value, null, space)), at)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('near misses of a valid text: the same answer as JSON.parse', () => {
    fc.assert(
      fc.property(
        fc.jsonValue(),
        fc.nat(),
        fc.constantFrom(...JSONISH),
        fc.constantFrom('replace', 'insert', 'delete'),
        cuts,
        (value, where, char, edit, at) => {
          const text = JSON.stringify(value);
          const index = where % (text.length + 1);
          const changed =
            edit === 'insert'
              ? text.slice(0, index) + char + text.slice(index)
              : text.slice(0, index) + (edit === 'replace' ? char : '') + text.slice(index + 1);
          const bytes = Buffer.from(changed);
          expect(checks(bytes, at)).toBe(parses(bytes));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("hostile: texts of JSON's characters at random, and raw bytes (bad UTF-8 too): the same answer as JSON.parse", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...JSONISH), { maxLength: 40 }), cuts, (chars, at) => {
        const bytes = Buffer.from(chars.join(''));
        expect(checks(bytes, at)).toBe(parses(bytes));
      }),
      { numRuns: 3000 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 24 }), cuts, (raw, at) => {
        for (const bytes of [Buffer.from(raw), Buffer.concat([Buffer.from('["'), Buffer.from(raw), Buffer.from('"]')])])
          expect(checks(bytes, at)).toBe(parses(bytes));
      }),
      { numRuns: 3000 },
    );
  });

  it('deep nesting costs a bit a level, and closing the wrong kind is refused', () => {
    const depth = 100_000;
    expect(checks(Buffer.from('['.repeat(depth) + ']'.repeat(depth)), [depth - 3, depth + 5])).toBe(true);
    expect(checks(Buffer.from('{"a":'.repeat(depth) + '1' + '}'.repeat(depth)))).toBe(true);
    expect(checks(Buffer.from('['.repeat(depth) + ']'.repeat(depth - 1) + '}'))).toBe(false);
    expect(checks(Buffer.from('['.repeat(depth) + ']'.repeat(depth - 1)))).toBe(false);
  });
});
