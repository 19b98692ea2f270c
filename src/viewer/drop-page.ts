/**
 * The viewer's file drop zone, as markup and style for the page shell (src/viewer/html.ts): a
 * big zone saying what the viewer reads on the empty viewer (`memscope viewer`), one line above a
 * report, and a veil over the page while a file is dragged over it. src/viewer/app/drop.ts gives
 * it life.
 */

/** The empty viewer's title. */
export const VIEWER_TITLE = 'memscope viewer';

/** What the viewer reads, in the words a user knows the files by. */
export const ACCEPTED_FILES =
  'PyTorch memory snapshots (torch.cuda.memory._dump_snapshot pickles, any protocol from 2, also gzipped; memscope\'s own allocator snapshots), ' +
  'Kineto profiler traces (.json, .json.gz), export_memory_timeline JSON, and memscope captures (memscope run)';

export const DROP_CSS = `
#drop { margin: 8px 0; }
#drop-zone { border: 2px dashed #b9c3cf; border-radius: 6px; padding: 6px 12px; color: #444; background: #fff; font-size: 12px; }
#drop-zone p { margin: 2px 0; }
#drop-zone button { font: inherit; padding: 1px 8px; }
body.empty #drop-zone { padding: 70px 24px; text-align: center; font-size: 15px; }
body.empty #drop-zone .drop-accepts { max-width: 760px; margin: 10px auto 0; color: #666; font-size: 13px; }
body:not(.empty) #drop-zone .drop-accepts { display: none; }
body.empty > :not(header):not(#drop):not(#drop-veil):not(script) { display: none !important; }
#drop-status { margin: 6px 0; font-size: 13px; color: #333; font-variant-numeric: tabular-nums; }
#drop-error { margin: 6px 0; padding: 6px 10px; border: 1px solid #e6b0b0; border-left: 4px solid #e15759; background: #fff; font: 12px ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
#drop-veil { position: fixed; inset: 0; display: flex; align-items: center; justify-content: center; background: rgba(240, 245, 252, 0.93); border: 4px dashed #4e79a7; font-size: 22px; font-weight: 600; color: #234; pointer-events: none; z-index: 10; }
#drop-veil[hidden] { display: none; }
`;

/**
 * The zone's markup; static text only, in ASCII (entities for the rest): a page whose source is
 * all Latin-1 is decoded and parsed as one-byte text, half the memory of a page with one other
 * character.
 */
export function dropZoneHtml(): string {
  return `<div id="drop">
<div id="drop-zone">
<p class="drop-what">Drop a file anywhere on this page to view it, or <button id="drop-pick" type="button">open a file&hellip;</button><input id="drop-input" type="file" hidden aria-label="open a file"></p>
<p class="drop-accepts">Reads, inside this page (nothing is uploaded): ${ACCEPTED_FILES}.</p>
</div>
<div id="drop-status" role="status" hidden></div>
<div id="drop-error" role="alert" hidden></div>
</div>
<div id="drop-veil" hidden>Drop the file to open it</div>`;
}
