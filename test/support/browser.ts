// Headless Chromium for browser tests, driven by playwright-core against the
// system's /usr/bin/chromium (Playwright's own browser download cannot run
// here). WebGL2 comes from SwiftShader. WebGPU needs `webgpu: true` and a
// page from `openSecurePage`: Chromium then offers SwiftShader's Vulkan as a
// fallback WebGPU adapter, no GPU and no extra package needed.
import { chromium, type Browser, type Page } from 'playwright-core';
import { build } from 'esbuild';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CHROMIUM_PATH = process.env.MEMSCOPE_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Browser tests never skip: without Chromium they fail with this message, so a machine that
 * lacks it shows red instead of a green run that tested nothing.
 */
export function requireChromium(): void {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`browser tests need Chromium at ${CHROMIUM_PATH}: apt-get install -y chromium (or set MEMSCOPE_CHROMIUM to its path)`);
  }
}

export async function launchChromium(opts: { webgpu?: boolean } = {}): Promise<Browser> {
  requireChromium();
  const args = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--disable-quic',
    '--use-angle=swiftshader',
    '--enable-unsafe-swiftshader',
  ];
  // Without this flag requestAdapter() resolves to null: the only adapter
  // here is SwiftShader's, which Chromium offers only as an unsafe fallback.
  if (opts.webgpu) args.push('--enable-unsafe-webgpu');
  return chromium.launch({ executablePath: CHROMIUM_PATH, args, headless: true });
}

/**
 * A blank page in a secure context. `navigator.gpu` exists only in secure
 * contexts, and the about:blank of `browser.newPage()` + `setContent` is not
 * one (there `navigator.gpu` is undefined whatever the flags). The page is
 * served as http://localhost/ by an in-process route, so nothing touches the
 * network; localhost counts as potentially trustworthy.
 */
export async function openSecurePage(browser: Browser): Promise<Page> {
  const page = await browser.newPage();
  await page.route('http://localhost/', (route) =>
    route.fulfill({ contentType: 'text/html', body: '<!doctype html><html><body></body></html>' }),
  );
  await page.goto('http://localhost/');
  return page;
}

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Bundles a page's program — TypeScript source that imports TFJS and memscope's
 * own `./src/...` files, resolved from the repository root — into one classic
 * script, in memory.
 */
export async function bundlePageScript(source: string, sourcefile: string): Promise<string> {
  const out = await build({
    stdin: { contents: source, resolveDir: REPO_ROOT, loader: 'ts', sourcefile },
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    logLevel: 'silent',
  });
  return out.outputFiles[0]!.text;
}

/**
 * A blank page (a secure one when `secure`, as WebGPU needs) with `script`
 * loaded. `errors` collects uncaught page errors for the test to assert empty.
 */
export async function openPageWithScript(
  browser: Browser,
  script: string,
  opts: { secure?: boolean } = {},
): Promise<{ page: Page; errors: string[] }> {
  const page = opts.secure ? await openSecurePage(browser) : await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  if (!opts.secure) await page.setContent('<!doctype html><html><body></body></html>');
  await page.addScriptTag({ content: script });
  return { page, errors };
}
