// A page program for the WebGPU benches: bundled from source that imports TFJS and memscope's
// built dist/, and run in headless Chromium on SwiftShader's WebGPU adapter. WebGPU exists only
// in a secure context, so the page is served as http://localhost/ by an in-process route.
import { build } from 'esbuild';
import { chromium } from 'playwright-core';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = process.env.MEMSCOPE_CHROMIUM ?? '/usr/bin/chromium';

/** `source` bundled into one classic script, imports resolved from the repository root. */
export async function bundleBenchPage(source, sourcefile) {
  const out = await build({
    stdin: { contents: source, resolveDir: root, loader: 'js', sourcefile },
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    logLevel: 'silent',
  });
  return out.outputFiles[0].text;
}

/** A fresh Chromium with WebGPU and a secure page running `script`; close the browser when done. */
export async function openWebgpuPage(script) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--enable-unsafe-webgpu', '--no-first-run'],
  });
  try {
    const page = await browser.newPage();
    await page.route('http://localhost/', (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><html><body></body></html>' }));
    await page.goto('http://localhost/');
    await page.addScriptTag({ content: script });
    return { browser, page };
  } catch (err) {
    await browser.close();
    throw err;
  }
}
