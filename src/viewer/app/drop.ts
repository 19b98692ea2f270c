/**
 * Reading a file dropped on the page (or opened with its button) and showing it in place of what
 * the page showed. The file becomes report data in the page itself, through the readers
 * `memscope report` uses (src/viewer/open-file.ts); then the page is rebuilt from the same markup
 * and the app runs again on the new data. Running the app again, rather than resetting every view
 * by hand, keeps each view free of any notion of "the next file": each run of the bundle starts
 * from a fresh page with fresh module state.
 *
 * A run's listeners on `window` and `document` are tied to that run (an AbortSignal), so a view of
 * the previous file stops receiving events, and its data can be collected, once the next runs.
 */
import { humanBytes } from '../../core/units.js';
import type { ReportData } from '../report-data.js';
import { reportBody } from '../html.js';
import { errorLine, reportDataFromBlob, type OpenProgress } from '../open-file.js';
import { readEmbeddedReportInStages, type StagedReport } from '../report-embed.js';

declare global {
  interface Window {
    /** For tests: where reading a dropped file is, and the data the page shows. */
    memscopeDrop?: {
      /** `empty` (nothing to show), `shown` (data drawn), `reading`, or `error` (the line is on the page). */
      readonly state: 'empty' | 'reading' | 'shown' | 'error';
      /** How many files were dropped or opened on this page. */
      readonly opened: number;
      data(): ReportData | null;
    };
  }
}

/** What outlives one run of the app: the app's own source, the listeners' scope, the count of opened files. */
interface PageState {
  appSource: string;
  run: AbortController;
  opened: number;
  /** Increases with each file chosen; a read that finishes after a newer one started is dropped. */
  reads: number;
  state: 'empty' | 'reading' | 'shown' | 'error';
  data: ReportData | null;
  /** Settles true once every part of the shown data can be read, false when the rest is damaged (its line is shown). */
  complete: Promise<boolean>;
  readonly addListener: typeof EventTarget.prototype.addEventListener;
}

const STATE_KEY = Symbol.for('memscope.viewer.page');
const HANDOFF_KEY = Symbol.for('memscope.viewer.dropped');

type Globals = typeof globalThis & { [STATE_KEY]?: PageState; [HANDOFF_KEY]?: ReportData };

/** The page state, made on the first run: it ties listeners on `window` and `document` to the current run. */
function pageState(): PageState {
  const g = globalThis as Globals;
  const existing = g[STATE_KEY];
  if (existing) return existing;
  const addListener = EventTarget.prototype.addEventListener;
  const state: PageState = { appSource: '', run: new AbortController(), opened: 0, reads: 0, state: 'empty', data: null, complete: Promise.resolve(true), addListener };
  for (const target of [window, document] as EventTarget[]) {
    target.addEventListener = function (type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void {
      const opts: AddEventListenerOptions = typeof options === 'object' ? options : { capture: options === true };
      addListener.call(this, type, listener, opts.signal ? opts : { ...opts, signal: state.run.signal });
    };
  }
  g[STATE_KEY] = state;
  return state;
}

/**
 * The data a report page embeds (its columns inflate asynchronously), or null on the empty viewer.
 * A column found damaged when a view first reads it puts its line on the page.
 */
function embeddedData(state: PageState): Promise<StagedReport> | null {
  // The JSON comes in parts, in document order (html.ts).
  const text = joinedText('script.memscope-data');
  return text ? readEmbeddedReportInStages(text, (err) => showError(state, errorLine(err)), restBase64) : null;
}

/** The text of the elements `selector` finds, joined in document order. */
function joinedText(selector: string): string {
  return Array.from(document.querySelectorAll(selector), (s) => s.textContent ?? '').join('');
}

/**
 * A packed report's second buffer, which html.ts places after the app's script: read once the
 * document is parsed, and after the task that draws the chart's first frame.
 */
async function restBase64(): Promise<string> {
  if (document.readyState === 'loading') await new Promise((resolve) => document.addEventListener('DOMContentLoaded', resolve, { once: true }));
  await new Promise((resolve) => setTimeout(resolve, 0));
  return joinedText('script.memscope-rest');
}

/**
 * Settles once every part of the data this run shows can be read: at once for a dropped file; for
 * an embedded report, once the buffer after the first frame's columns is read too. False
 * when the rest turned out damaged (the page shows its line) or a newer run started.
 */
export function dataComplete(): Promise<boolean> {
  return pageState().complete;
}

/** Aborted when the next run of the app starts (a file dropped on the page): work a run defers checks it. */
export function runSignal(): AbortSignal {
  return pageState().run.signal;
}

/** Shows `err` as the page's one error line (the app failed on the data it was given). */
export function showPageError(err: unknown): void {
  showError(pageState(), errorLine(err));
}

/**
 * Starts a run of the app: ends the previous run's listeners, wires the drop zone, and gives the
 * data to show — a dropped file's (at once), else the embedded report's (once read), else null (the
 * empty viewer, where the app draws nothing and the page says what it reads). An embedded report
 * that cannot be read puts its line under the drop zone and gives null.
 */
export function beginPage(): ReportData | Promise<ReportData | null> | null {
  const state = pageState();
  const script = document.currentScript;
  if (script?.textContent) state.appSource = script.textContent;
  state.run.abort();
  state.run = new AbortController();
  const g = globalThis as Globals;
  const handed = g[HANDOFF_KEY] ?? null;
  delete g[HANDOFF_KEY];
  const embedded = handed ? null : embeddedData(state);
  const data = handed;
  state.data = data;
  state.complete = Promise.resolve(data !== null);
  state.state = data ? 'shown' : embedded ? 'reading' : 'empty';
  document.body.classList.toggle('empty', !data && !embedded);
  wireDropZone(state);
  window.memscopeDrop = {
    get state() {
      return state.state;
    },
    get opened() {
      return state.opened;
    },
    data: () => state.data,
  };
  if (!embedded) return data;
  // A file dropped while the embedded data is read replaces it.
  const run = state.run;
  const reads = state.reads;
  const current = (): boolean => run === state.run && reads === state.reads;
  return embedded.then(
    (read) => {
      if (!current()) return null;
      state.data = read.data;
      state.state = 'shown';
      state.complete = read.complete.then(
        () => current(),
        (err: unknown) => {
          if (current()) showError(state, errorLine(err));
          return false;
        },
      );
      return read.data;
    },
    (err: unknown) => {
      if (!current()) return null;
      document.body.classList.add('empty');
      showError(state, errorLine(err));
      return null;
    },
  );
}

function element(id: string): HTMLElement {
  return document.getElementById(id)!;
}

function showError(state: PageState, line: string): void {
  state.state = 'error';
  element('drop-status').hidden = true;
  const box = element('drop-error');
  box.textContent = line;
  box.hidden = false;
}

function progressLine(name: string, p: OpenProgress): string {
  if (p.phase === 'building') return `Read ${name} (${humanBytes(p.totalBytes)}); building the views…`;
  const share = p.totalBytes > 0 ? Math.floor((100 * p.bytesRead) / p.totalBytes) : 100;
  return `Reading ${name}: ${humanBytes(p.bytesRead)} of ${humanBytes(p.totalBytes)} (${share} %)`;
}

/** Reads `file` and, unless a newer file was chosen meanwhile, shows it. */
async function openFile(state: PageState, file: File): Promise<void> {
  const read = ++state.reads;
  state.opened++;
  state.state = 'reading';
  element('drop-error').hidden = true;
  const status = element('drop-status');
  status.hidden = false;
  status.textContent = progressLine(file.name, { phase: 'reading', bytesRead: 0, totalBytes: file.size });
  let shownShare = -1;
  const onProgress = (p: OpenProgress): void => {
    if (read !== state.reads) return;
    // One DOM write per percent: a gigabyte arrives in some ten thousand chunks.
    const share = p.phase === 'building' ? 101 : Math.floor((100 * p.bytesRead) / Math.max(1, p.totalBytes));
    if (share === shownShare) return;
    shownShare = share;
    status.textContent = progressLine(file.name, p);
  };
  let data: ReportData;
  try {
    data = await reportDataFromBlob(file, file.name, { onProgress });
  } catch (err) {
    if (read === state.reads) showError(state, errorLine(err));
    return;
  }
  if (read === state.reads) showData(state, data);
}

/** Rebuilds the page for `data` and runs the app on it. */
function showData(state: PageState, data: ReportData): void {
  (globalThis as Globals)[HANDOFF_KEY] = data;
  document.title = data.title;
  document.body.innerHTML = reportBody(data.title, data.source.file);
  window.scrollTo(0, 0);
  let failure: unknown = null;
  // The app's own errors on this data become the page's error line, not an uncaught error.
  const scope = new AbortController();
  state.addListener.call(
    window,
    'error',
    (e: Event) => {
      const ev = e as ErrorEvent;
      ev.preventDefault();
      failure = ev.error ?? new Error(ev.message);
    },
    { signal: scope.signal },
  );
  const script = document.createElement('script');
  script.textContent = state.appSource;
  document.body.append(script);
  scope.abort();
  if (failure !== null) showError(state, errorLine(failure));
}

function wireDropZone(state: PageState): void {
  const input = element('drop-input') as HTMLInputElement;
  element('drop-pick').addEventListener('click', () => input.click());
  input.addEventListener('change', () => {
    const file = input.files?.[0];
    if (file) void openFile(state, file);
  });
  const veil = element('drop-veil');
  const carriesFiles = (e: DragEvent): boolean => !!e.dataTransfer && Array.from(e.dataTransfer.types).includes('Files');
  document.addEventListener('dragover', (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    e.dataTransfer!.dropEffect = 'copy';
    veil.hidden = false;
  });
  document.addEventListener('dragleave', (e) => {
    // Leaving the window (no element under the pointer any more) hides the veil.
    if (e.relatedTarget === null) veil.hidden = true;
  });
  document.addEventListener('drop', (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    veil.hidden = true;
    const file = e.dataTransfer!.files[0];
    if (file) void openFile(state, file);
  });
}
