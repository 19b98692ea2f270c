/**
 * Saving bytes from a page: a Blob, an object URL and a click on a detached `<a download>`.
 * The URL is revoked once the browser has taken the download.
 */

/** Bytes or text a page saves. */
export type Downloadable = Uint8Array | string | Blob;

/** A Blob of `data` with `type` (a Blob passes through). */
export function toBlob(data: Downloadable, type: string): Blob {
  if (data instanceof Blob) return data;
  // A copy into a plain ArrayBuffer: a Uint8Array over a SharedArrayBuffer is no BlobPart.
  return new Blob([typeof data === 'string' ? data : new Uint8Array(data)], { type });
}

/** Offers `data` to the user as a file named `filename` (the browser's download bar or dialog). */
export function downloadFile(data: Downloadable, filename: string, type = 'application/octet-stream'): void {
  const url = URL.createObjectURL(toBlob(data, type));
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.rel = 'noopener';
  a.style.display = 'none';
  document.body.appendChild(a);
  try {
    a.click();
  } finally {
    a.remove();
    // The download has started from the click; the URL is no longer needed once this task ends.
    setTimeout(() => URL.revokeObjectURL(url), 0);
  }
}

/** A file name safe on every OS: `prefix-YYYYMMDD-HHMMSS.ext` in local time. */
export function timestampedName(prefix: string, ext: string, date = new Date()): string {
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${prefix}-${date.getFullYear()}${p(date.getMonth() + 1)}${p(date.getDate())}-${p(date.getHours())}${p(date.getMinutes())}${p(date.getSeconds())}.${ext}`;
}
