// Headless Chromium for browser tests, driven by playwright-core against the
// system's /usr/bin/chromium (Playwright's own browser download cannot run
// here). WebGL2 comes from SwiftShader; WebGPU needs `webgpu: true`.
import { chromium, type Browser } from 'playwright-core';
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
  if (opts.webgpu) args.push('--enable-unsafe-webgpu');
  return chromium.launch({ executablePath: CHROMIUM_PATH, args, headless: true });
}
