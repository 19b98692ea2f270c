// A report page written to disk, opened in a fresh tab of headless Chromium the way a user opens
// the file, with every page error, console error and network request collected: a report must
// make none. Beside it, what the browser tests of the report do with the page again and again:
// waiting for the chart to draw, and reading the timeline canvas's pixels.
import type { Browser, Page } from 'playwright-core';

export async function openReportPage(browser: Browser, htmlPath: string, viewport = { width: 1280, height: 1000 }): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('request', (req) => {
    if (!req.url().startsWith('file:')) errors.push(`network request: ${req.url()}`);
  });
  await page.goto(`file://${htmlPath}`);
  await firstFrame(page);
  return { page, errors };
}

/**
 * Waits until the report's chart has drawn its first frame (or the page has said it has nothing to
 * draw) and the sections under it are built; throws with the page's error line if it shows one.
 */
export async function firstFrame(page: Page): Promise<void> {
  const outcome = await page.waitForFunction(() => {
    const error = document.getElementById('drop-error');
    if (error && !error.hidden && error.textContent) return `the error line ${JSON.stringify(error.textContent)}`;
    const viewer = window.memscopeViewer;
    return viewer?.sectionsReady && (viewer.frames > 0 || document.getElementById('nothing-to-draw')) ? 'ready' : false;
  });
  const shown = await outcome.jsonValue();
  if (shown !== 'ready') throw new Error(`the report page shows ${shown}`);
}

/** Runs `act` and waits until the chart has drawn a frame after it. */
export async function redrawn(page: Page, act: () => Promise<unknown>): Promise<void> {
  const before = await page.evaluate(() => window.memscopeViewer!.frames);
  await act();
  await page.waitForFunction((n) => window.memscopeViewer!.frames > n, before);
}

/** The colour (r, g, b) of the timeline canvas under a point of the page, in CSS pixels. */
export async function timelinePixelAt(page: Page, point: { x: number; y: number }): Promise<[number, number, number]> {
  return page.evaluate((p) => {
    const c = document.getElementById('timeline') as HTMLCanvasElement;
    const r = c.getBoundingClientRect();
    const px = c.getContext('2d')!.getImageData(Math.round((p.x - r.left) * devicePixelRatio), Math.round((p.y - r.top) * devicePixelRatio), 1, 1).data;
    return [px[0]!, px[1]!, px[2]!] as [number, number, number];
  }, point);
}

/** Pixels of the timeline canvas in a saturated colour: a band, not the grey summary or the axes. */
export async function saturatedPixels(page: Page): Promise<number> {
  return page.evaluate(() => {
    const c = document.getElementById('timeline') as HTMLCanvasElement;
    const img = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < img.length; i += 4) if (Math.max(img[i]!, img[i + 1]!, img[i + 2]!) - Math.min(img[i]!, img[i + 1]!, img[i + 2]!) > 60) n++;
    return n;
  });
}

/** Non-white pixels of the timeline canvas's plot area (its left tenth holds the axis labels). */
export async function inkedPixels(page: Page): Promise<number> {
  return page.evaluate(() => {
    const c = document.getElementById('timeline') as HTMLCanvasElement;
    const x0 = Math.round(c.width * 0.1);
    const img = c.getContext('2d')!.getImageData(x0, 0, c.width - x0, c.height).data;
    let n = 0;
    for (let i = 0; i < img.length; i += 4) if (img[i]! < 240 || img[i + 1]! < 240 || img[i + 2]! < 240) n++;
    return n;
  });
}
