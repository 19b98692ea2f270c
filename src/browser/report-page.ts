/**
 * The report page (memscope's viewer, the page `memscope report` writes) built in the page from
 * a snapshot's pickle bytes, and opened in a new tab through a Blob URL. The viewer's app script
 * is not part of this module (it is a separate bundle, dist/viewer/app.js): it is fetched from
 * beside memscope's own files, or given by the caller.
 */
import { MemscopeError } from '../core/errors.js';
import { readSnapshot } from '../torch/snapshot-decoder.js';
import { renderReportHtml } from '../viewer/html.js';
import { DEFAULT_CAPS } from '../viewer/report-data.js';
import { snapshotToReport } from '../viewer/torch-report.js';
import { toBlob } from './download.js';

/** The viewer app: its script text, a URL to fetch it from, or a function that returns the text. */
export type ViewerScript = string | URL | (() => Promise<string>);

/** The viewer app's text. By default dist/viewer/app.js beside this module (dist/browser/). */
export async function loadViewerScript(source?: ViewerScript): Promise<string> {
  if (typeof source === 'string') return source;
  if (typeof source === 'function') return source();
  let url: URL;
  try {
    url = source ?? new URL('../viewer/app.js', import.meta.url);
  } catch {
    throw new MemscopeError('no-viewer', 'the report viewer\'s script cannot be located from this bundle: pass viewerScript (the text or URL of memscope\'s dist/viewer/app.js)');
  }
  const response = await fetch(url);
  if (!response.ok) throw new MemscopeError('no-viewer', `the report viewer's script did not load from ${url.href} (HTTP ${response.status}): pass viewerScript`);
  return response.text();
}

/** The self-contained report page for a PyTorch-schema snapshot's pickle bytes. */
export function snapshotReportHtml(bytes: Uint8Array, name: string, viewerJs: string): string {
  const snapshot = readSnapshot(bytes);
  return renderReportHtml(snapshotToReport(snapshot, name, DEFAULT_CAPS), viewerJs);
}

/**
 * Opens `html` in a new tab from a Blob URL; returns the URL (revoke it with
 * URL.revokeObjectURL when the tab is no longer needed; the page keeps it alive meanwhile).
 */
export function openHtmlInNewTab(html: string): string {
  const url = URL.createObjectURL(toBlob(html, 'text/html'));
  const opened = window.open(url, '_blank');
  if (opened === null) {
    URL.revokeObjectURL(url);
    throw new MemscopeError('popup-blocked', 'the browser blocked the new tab for the report: allow pop-ups for this page, or call this from a click');
  }
  return url;
}
