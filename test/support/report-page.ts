// A report page written to disk, opened in a fresh tab of headless Chromium the way a user opens
// the file, with every page error, console error and network request collected: a report must
// make none.
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
  await page.waitForFunction(() => (window.memscopeViewer?.frames ?? 0) > 0);
  return { page, errors };
}
