/**
 * Escaping for text and attribute values placed in XML (SVG) and HTML.
 *
 * One function for both because the five characters below are the ones that
 * can end a text node or an attribute value in either language; escaping `'`
 * too means the result is safe inside single- or double-quoted attributes.
 * Characters XML 1.0 forbids outright (C0 controls other than tab/LF/CR, lone
 * surrogates, U+FFFE/U+FFFF) cannot be escaped — `&#1;` is itself illegal in
 * XML — so they are replaced by U+FFFD, keeping SVG output well-formed whatever
 * names a user's model carries.
 */
const ENTITY: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

// eslint-disable-next-line no-control-regex
const SPECIAL = /[&<>"']|[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

export function escapeXml(text: string): string {
  return text.replace(SPECIAL, (ch) => ENTITY[ch] ?? '\uFFFD');
}

/** The same escaping, under the name HTML writers look for. */
export const escapeHtml = escapeXml;

/**
 * Text from a file (a global's name, a frame name, a key) made safe to print on a terminal: C0
 * and C1 control characters, DEL, line/paragraph separators and bidirectional overrides become
 * visible `\xNN` / `\uNNNN` escapes. A raw ESC or OSC sequence could otherwise move the cursor,
 * recolour or retitle the user's terminal, and a `\r` could overwrite the line it is on with
 * text of the file's choosing.
 */
// eslint-disable-next-line no-control-regex
const TERMINAL_UNSAFE = /[\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/g;

export function escapeControl(text: string): string {
  TERMINAL_UNSAFE.lastIndex = 0;
  if (!TERMINAL_UNSAFE.test(text)) return text;
  return text.replace(TERMINAL_UNSAFE, (ch) => {
    const c = ch.charCodeAt(0);
    return c <= 0xff ? `\\x${c.toString(16).padStart(2, '0')}` : `\\u${c.toString(16).padStart(4, '0')}`;
  });
}
