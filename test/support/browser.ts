// Headless Chromium for browser tests, driven by playwright-core against the
// system's /usr/bin/chromium (Playwright's own browser download cannot run
// here). WebGL2 comes from SwiftShader. WebGPU needs `webgpu: true` and a
// page from `openSecurePage`: Chromium then offers SwiftShader's Vulkan as a
// fallback WebGPU adapter, no GPU and no extra package needed.
import { chromium, type Browser, type Page } from 'playwright-core';
import { existsSync } from 'node:fs';

export const CHROMIUM_PATH = process.env.MEMSCOPE_CHROMIUM ?? '/usr/bin/chromium';

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM_PATH);
}

export async function launchChromium(opts: { webgpu?: boolean } = {}): Promise<Browser> {
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
