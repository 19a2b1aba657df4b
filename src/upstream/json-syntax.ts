/**
 * Whether bytes are one JSON text, checked a chunk at a time (RFC 8259 grammar, as `JSON.parse` of
 * the bytes read as UTF-8 accepts it): a body too large to hold decoded is checked as it decodes,
 * a chunk per turn of the event loop, and never held whole. Only the syntax is checked; nothing is
 * built. Bytes of 0x80 and above are accepted inside strings only (UTF-8 decoding never turns them
 * into ASCII), as are lone surrogates in `\u` escapes, and nesting has no limit (a bit per level).
 */

/** What the next byte may be. */
const enum At {
  /** A value (after `[`, `,` in an array, `:`, or at the start). */
  Value,
  /** A value or `]` (just after `[`). */
  ValueOrClose,
  /** A key or `}` (just after `{`). */
  KeyOrClose,
  /** A key (after `,` in an object). */
  Key,
  /** `:` after a key. */
  Colon,
  /** `,` or the container's close; at the top level, only whitespace. */
  AfterValue,
  String,
  Escape,
  /** The 4 hex digits of `\u`. */
  Unicode,
  /** The rest of `true`, `false` or `null`. */
  Literal,
  /** After `-`: the integer part's first digit. */
  Minus,
  /** After a leading `0`. */
  Zero,
  /** In the integer part (first digit 1-9). */
  Integer,
  /** After `.`: its first digit. */
  FractionFirst,
  Fraction,
  /** After `e`/`E`: a sign or a digit. */
  ExponentSign,
  /** After the exponent's sign: its first digit. */
  ExponentFirst,
  Exponent,
  Invalid,
}

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const isWhitespace = (byte: number): boolean => byte === SPACE || byte === LF || byte === CR || byte === TAB;
const isDigit = (byte: number): boolean => byte >= 0x30 && byte <= 0x39;
const isHex = (byte: number): boolean => isDigit(byte) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46);
/** `"`, `\`, `/`, `b`, `f`, `n`, `r`, `t`: the escapes besides `\u`. */
const SHORT_ESCAPES: ReadonlySet<number> = new Set([0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74]);
const TRUE = Buffer.from('true');
const FALSE = Buffer.from('false');
const NULL = Buffer.from('null');

/** Feed it the bytes in order (`write`), then ask `end()`. */
export class JsonSyntax {
  #at: At = At.Value;
  /** The open containers, one bit a level: 1 an object, 0 an array. */
  #kinds = new Uint8Array(64);
  #depth = 0;
  /** The string being read is a key (then `:` follows). */
  #key = false;
  #literal: Buffer = TRUE;
  /** Bytes of the literal matched, or hex digits of `\u` read. */
  #matched = 0;

  /** False once the bytes so far cannot begin a JSON text (the rest need not be written). */
  get valid(): boolean {
    return this.#at !== At.Invalid;
  }

  write(bytes: Uint8Array): boolean {
    const length = bytes.length;
    let index = 0;
    while (index < length && this.#at !== At.Invalid) {
      if (this.#at === At.String) {
        index = this.#stringRun(bytes, index);
        if (index < length) this.#step(bytes[index]!);
      } else this.#step(bytes[index]!);
      index++;
    }
    return this.#at !== At.Invalid;
  }

  /** Whether the bytes written are exactly one JSON text (surrounding whitespace allowed). */
  end(): boolean {
    if (this.#depth !== 0) return false;
    const at = this.#at;
    return at === At.AfterValue || at === At.Zero || at === At.Integer || at === At.Fraction || at === At.Exponent;
  }

  /** The index of the first byte from `index` that ends or escapes the string, or is not allowed in it. */
  #stringRun(bytes: Uint8Array, index: number): number {
    const length = bytes.length;
    while (index < length) {
      const byte = bytes[index]!;
      if (byte < SPACE || byte === QUOTE || byte === BACKSLASH) return index;
      index++;
    }
    return index;
  }

  #step(byte: number): void {
    switch (this.#at) {
      case At.String:
        if (byte === QUOTE) this.#at = this.#key ? At.Colon : At.AfterValue;
        else if (byte === BACKSLASH) this.#at = At.Escape;
        else this.#at = At.Invalid; // a control byte
        return;
      case At.Escape:
        if (byte === 0x75) {
          this.#at = At.Unicode;
          this.#matched = 0;
        } else this.#at = SHORT_ESCAPES.has(byte) ? At.String : At.Invalid;
        return;
      case At.Unicode:
        if (!isHex(byte)) this.#at = At.Invalid;
        else if (++this.#matched === 4) this.#at = At.String;
        return;
      case At.Literal:
        if (byte !== this.#literal[this.#matched]) this.#at = At.Invalid;
        else if (++this.#matched === this.#literal.length) this.#at = At.AfterValue;
        return;
      case At.Value:
      case At.ValueOrClose:
        return this.#value(byte);
      case At.KeyOrClose:
      case At.Key:
        if (isWhitespace(byte)) return;
        if (byte === QUOTE) this.#openString(true);
        else if (byte === 0x7d && this.#at === At.KeyOrClose) this.#close(1);
        else this.#at = At.Invalid;
        return;
      case At.Colon:
        if (byte === 0x3a) this.#at = At.Value;
        else if (!isWhitespace(byte)) this.#at = At.Invalid;
        return;
      case At.AfterValue:
        return this.#afterValue(byte);
      default:
        return this.#number(byte);
    }
  }

  #value(byte: number): void {
    if (isWhitespace(byte)) return;
    if (byte === QUOTE) return this.#openString(false);
    if (byte === 0x7b) return this.#open(1);
    if (byte === 0x5b) return this.#open(0);
    if (byte === 0x5d && this.#at === At.ValueOrClose) return this.#close(0);
    if (byte === 0x2d) this.#at = At.Minus;
    else if (byte === 0x30) this.#at = At.Zero;
    else if (isDigit(byte)) this.#at = At.Integer;
    else if (byte === 0x74) this.#openLiteral(TRUE);
    else if (byte === 0x66) this.#openLiteral(FALSE);
    else if (byte === 0x6e) this.#openLiteral(NULL);
    else this.#at = At.Invalid;
  }

  #afterValue(byte: number): void {
    if (isWhitespace(byte)) return;
    if (this.#depth === 0) {
      this.#at = At.Invalid; // something after the one value
      return;
    }
    const inObject = this.#kind() === 1;
    if (byte === 0x2c) this.#at = inObject ? At.Key : At.Value;
    else if (byte === (inObject ? 0x7d : 0x5d)) this.#close(inObject ? 1 : 0);
    else this.#at = At.Invalid;
  }

  /** A byte in or after a number: the grammar's next step, or the number ends and the byte is read after it. */
  #number(byte: number): void {
    const digit = isDigit(byte);
    switch (this.#at) {
      case At.Minus:
        this.#at = byte === 0x30 ? At.Zero : digit ? At.Integer : At.Invalid;
        return;
      case At.FractionFirst:
        this.#at = digit ? At.Fraction : At.Invalid;
        return;
      case At.ExponentSign:
        this.#at = byte === 0x2b || byte === 0x2d ? At.ExponentFirst : digit ? At.Exponent : At.Invalid;
        return;
      case At.ExponentFirst:
        this.#at = digit ? At.Exponent : At.Invalid;
        return;
    }
    if (digit && this.#at !== At.Zero) return; // Integer, Fraction, Exponent go on
    if (byte === 0x2e && (this.#at === At.Zero || this.#at === At.Integer)) this.#at = At.FractionFirst;
    else if ((byte === 0x65 || byte === 0x45) && this.#at !== At.Exponent) this.#at = At.ExponentSign;
    else {
      this.#at = At.AfterValue;
      this.#afterValue(byte);
    }
  }

  #openString(key: boolean): void {
    this.#key = key;
    this.#at = At.String;
  }

  #openLiteral(literal: Buffer): void {
    this.#literal = literal;
    this.#matched = 1;
    this.#at = At.Literal;
  }

  /** `kind`: 1 an object, 0 an array. */
  #open(kind: number): void {
    const depth = this.#depth;
    if (depth >> 3 >= this.#kinds.length) {
      const grown = new Uint8Array(this.#kinds.length * 2);
      grown.set(this.#kinds);
      this.#kinds = grown;
    }
    const slot = depth >> 3;
    const bit = 1 << (depth & 7);
    this.#kinds[slot] = kind === 1 ? this.#kinds[slot]! | bit : this.#kinds[slot]! & ~bit;
    this.#depth = depth + 1;
    this.#at = kind === 1 ? At.KeyOrClose : At.ValueOrClose;
  }

  #close(kind: number): void {
    if (this.#depth === 0 || this.#kind() !== kind) {
      this.#at = At.Invalid;
      return;
    }
    this.#depth--;
    this.#at = At.AfterValue;
  }

  /** The innermost open container: 1 an object, 0 an array. */
  #kind(): number {
    const depth = this.#depth - 1;
    return (this.#kinds[depth >> 3]! >> (depth & 7)) & 1;
  }
}
