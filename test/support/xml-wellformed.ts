// A strict little XML parser for tests: it accepts only well-formed XML
// (balanced tags, quoted unique attributes, valid entity and character
// references, one root element, no characters XML forbids) and returns the
// element tree so tests can look inside SVG output without a browser.
export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  /** Concatenated, unescaped text directly inside this element. */
  text: string;
}

const NAME = /^[A-Za-z_:][-A-Za-z0-9_:.]*/;
const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };
// eslint-disable-next-line no-control-regex
const FORBIDDEN = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;

function unescape(raw: string, at: number): string {
  if (raw.includes('<')) throw new Error(`'<' in character data near offset ${at}`);
  return raw.replace(/&([^;]*);|&/g, (m, ref: string | undefined) => {
    if (ref === undefined) throw new Error(`bare '&' near offset ${at}`);
    if (ref in ENTITIES) return ENTITIES[ref]!;
    const num = /^#(\d+)$/.exec(ref) ?? /^#x([0-9a-fA-F]+)$/.exec(ref);
    if (!num) throw new Error(`unknown entity &${ref}; near offset ${at}`);
    const code = parseInt(num[1]!, ref.startsWith('#x') ? 16 : 10);
    const ch = String.fromCodePoint(code);
    if (FORBIDDEN.test(ch) || code === 0) throw new Error(`character reference &${ref}; is not allowed in XML`);
    return ch;
  });
}

export function parseXml(source: string): XmlElement {
  if (FORBIDDEN.test(source)) throw new Error('document contains a character XML forbids');
  let i = 0;
  const stack: XmlElement[] = [];
  let root: XmlElement | null = null;
  const skipSpace = () => {
    while (i < source.length && /\s/.test(source[i]!)) i++;
  };
  while (i < source.length) {
    if (source.startsWith('<?', i)) {
      const end = source.indexOf('?>', i);
      if (end < 0) throw new Error('unterminated processing instruction');
      i = end + 2;
    } else if (source.startsWith('<!--', i)) {
      const end = source.indexOf('-->', i);
      if (end < 0) throw new Error('unterminated comment');
      i = end + 3;
    } else if (source.startsWith('<![CDATA[', i)) {
      const end = source.indexOf(']]>', i);
      if (end < 0 || stack.length === 0) throw new Error('bad CDATA section');
      stack[stack.length - 1]!.text += source.slice(i + 9, end);
      i = end + 3;
    } else if (source.startsWith('<!', i)) {
      throw new Error(`unexpected declaration at offset ${i}`);
    } else if (source.startsWith('</', i)) {
      i += 2;
      const m = NAME.exec(source.slice(i));
      if (!m) throw new Error(`bad end tag at offset ${i}`);
      i += m[0].length;
      skipSpace();
      if (source[i] !== '>') throw new Error(`bad end tag </${m[0]} at offset ${i}`);
      i++;
      const open = stack.pop();
      if (!open || open.name !== m[0]) throw new Error(`</${m[0]}> closes <${open?.name ?? 'nothing'}> at offset ${i}`);
    } else if (source[i] === '<') {
      i++;
      const m = NAME.exec(source.slice(i));
      if (!m) throw new Error(`bad start tag at offset ${i}`);
      i += m[0].length;
      const el: XmlElement = { name: m[0], attrs: {}, children: [], text: '' };
      for (;;) {
        const before = i;
        skipSpace();
        if (source.startsWith('/>', i) || source[i] === '>') break;
        if (i === before) throw new Error(`missing space before attribute at offset ${i}`);
        const a = NAME.exec(source.slice(i));
        if (!a) throw new Error(`bad attribute at offset ${i}`);
        i += a[0].length;
        skipSpace();
        if (source[i] !== '=') throw new Error(`attribute ${a[0]} without value at offset ${i}`);
        i++;
        skipSpace();
        const q = source[i];
        if (q !== '"' && q !== "'") throw new Error(`unquoted attribute ${a[0]} at offset ${i}`);
        const end = source.indexOf(q, i + 1);
        if (end < 0) throw new Error(`unterminated attribute ${a[0]}`);
        if (a[0] in el.attrs) throw new Error(`duplicate attribute ${a[0]} at offset ${i}`);
        el.attrs[a[0]] = unescape(source.slice(i + 1, end), i);
        i = end + 1;
      }
      const selfClosing = source.startsWith('/>', i);
      i += selfClosing ? 2 : 1;
      if (stack.length === 0) {
        if (root) throw new Error(`second root element <${el.name}> at offset ${i}`);
        root = el;
      } else stack[stack.length - 1]!.children.push(el);
      if (!selfClosing) stack.push(el);
    } else {
      const end = source.indexOf('<', i);
      const raw = source.slice(i, end < 0 ? source.length : end);
      if (stack.length === 0) {
        if (raw.trim()) throw new Error(`text outside the root element at offset ${i}`);
      } else stack[stack.length - 1]!.text += unescape(raw, i);
      i = end < 0 ? source.length : end;
    }
  }
  if (stack.length) throw new Error(`unclosed <${stack[stack.length - 1]!.name}>`);
  if (!root) throw new Error('no root element');
  return root;
}

/** Every element in document order. */
export function allElements(el: XmlElement): XmlElement[] {
  return [el, ...el.children.flatMap(allElements)];
}
