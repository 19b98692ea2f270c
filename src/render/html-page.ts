/**
 * The one page shell of every HTML file memscope writes (`memscope plot`,
 * `memscope report`, MemoryTracker's operator traces, MemoryProfile's
 * export_memory_timeline_html): a self-contained document whose
 * Content-Security-Policy forbids every fetch, so a page opened from disk can
 * neither load nor send anything. Style and, for pages that have one, the
 * script are inline; images may only be data: URLs.
 */
import { escapeHtml } from './escape.js';

export interface HtmlPage {
  /** Plain text of the `<title>`; escaped here. */
  readonly title: string;
  /** The style sheet, inlined in `<style>`. */
  readonly css: string;
  /** The markup between `<body>` and `</body>`, with every caller-supplied string already escaped. */
  readonly body: string;
  /** Inline script run at the end of the body; the policy allows inline scripts only when there is one. */
  readonly script?: string;
  /** Markup after the script (data it reads once the document is parsed), escaped like `body`. */
  readonly afterScript?: string;
}

/**
 * JSON for a `<script type="application/json">` element: `<` is written as
 * `\u003c` so no string in the data can close the element (`</script>`) or
 * open a comment; U+2028/2029 are escaped too for any consumer that evals.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** Inline script text must not contain `</script` either (a bundle never should, but make sure). */
function scriptText(js: string): string {
  return js.replace(/<\/(script)/gi, '<\\/$1');
}

export function renderHtmlPage(page: HtmlPage): string {
  const scriptSrc = page.script === undefined ? '' : " script-src 'unsafe-inline';";
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none';${scriptSrc} style-src 'unsafe-inline'; img-src data:">
<title>${escapeHtml(page.title)}</title>
<style>
${page.css.trim()}
</style>
</head>
<body>
${page.body.replace(/\n$/, '')}
${page.script === undefined ? '' : `<script>${scriptText(page.script)}</script>\n`}${page.afterScript ?? ''}</body>
</html>
`;
}
