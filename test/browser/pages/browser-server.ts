// A page at http://localhost/ whose files are served by an in-process route: files of the
// repository under the prefixes a test allows, and scripts built in memory. Nothing touches the
// network; localhost is a secure context, so `navigator.gpu` exists there.
import type { Browser, Page } from 'playwright-core';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { repoRoot } from '../../support/fixtures.js';

const TYPES: Record<string, string> = {
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.wasm': 'application/wasm',
  '.json': 'application/json',
  '.html': 'text/html',
};

function typeOf(path: string): string {
  const ext = /\.[a-z]+$/.exec(path)?.[0] ?? '';
  return TYPES[ext] ?? 'application/octet-stream';
}

export interface ServedPage {
  page: Page;
  /** Uncaught page errors, for the test to assert empty. */
  errors: string[];
  /** Console messages of type error. */
  consoleErrors: string[];
}

/**
 * Opens http://localhost/ with `scripts` (path → text) served from memory and repository files
 * under `allow` (path prefixes such as '/test/browser/pages/') served from disk; anything else,
 * or a file that does not exist, is a 404.
 */
export async function openServedPage(browser: Browser, opts: { scripts?: Record<string, string>; allow?: readonly string[]; body?: string }): Promise<ServedPage> {
  const page = await browser.newPage();
  const errors: string[] = [];
  const consoleErrors: string[] = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  await page.route('http://localhost/**', (route) => {
    const path = decodeURIComponent(new URL(route.request().url()).pathname);
    if (path === '/') return route.fulfill({ contentType: 'text/html', body: `<!doctype html><html><body>${opts.body ?? ''}</body></html>` });
    const script = opts.scripts?.[path];
    if (script !== undefined) return route.fulfill({ contentType: 'text/javascript', body: script });
    const file = resolve(repoRoot, `.${path}`);
    // A file the page asks for that is not there (an optional one a library probes for) is a 404.
    if (!path.includes('..') && (opts.allow ?? []).some((prefix) => path.startsWith(prefix)) && existsSync(file)) {
      return route.fulfill({ contentType: typeOf(path), body: readFileSync(file) });
    }
    return route.fulfill({ status: 404, body: `not served: ${path}` });
  });
  await page.goto('http://localhost/');
  return { page, errors, consoleErrors };
}
