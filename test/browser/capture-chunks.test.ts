// The in-page capture's text store: a capture past the longest string the engine makes is refused
// as text in one clear line, and still leaves the page whole as a Blob.
import { describe, expect, it } from 'vitest';
import { CaptureChunks } from '../../src/browser/capture.js';
import { errorLine } from '../../src/viewer/open-file.js';

describe('CaptureChunks', () => {
  it('gives the chunks back as text and as a UTF-8 Blob, equal', async () => {
    const chunks = new CaptureChunks();
    for (const c of ['{"format":"memscope-capture"}\n', '["s",1,"層"]\n', '["e",1,{}]\n']) chunks.write(c);
    const text = chunks.text();
    expect(text).toBe('{"format":"memscope-capture"}\n["s",1,"層"]\n["e",1,{}]\n');
    const blob = chunks.blob();
    expect(blob.type).toBe('application/x-ndjson');
    expect(await blob.text()).toBe(text);
    expect(blob.size).toBe(Buffer.byteLength(text));
  });

  it('past the longest string: text() is one line saying how to take it instead', () => {
    const chunks = new CaptureChunks();
    // One 1 MiB string, written 513 times (shared, so the test holds 1 MiB): 2^29 + 2^20 characters.
    const mib = 'x'.repeat(1 << 20);
    for (let i = 0; i < 513; i++) chunks.write(mib);
    let message = '';
    try {
      chunks.text();
    } catch (err) {
      message = errorLine(err);
    }
    expect(message).toBe('memscope: the capture is 537,919,488 characters, longer than this browser makes a string: take it with capture.blob() or capture.download()');
  });
});
