/**
 * A gzip stream's framing around raw deflate data written in pieces (RFC 1952): the header, and the
 * trailer (a final empty deflate block, the CRC-32 and length of everything added). Each piece's
 * deflate data must end on a byte boundary with no final block (zlib's Z_SYNC_FLUSH) so that the
 * pieces, one after another, form one deflate stream.
 */
export class GzipFraming {
  private crc = 0xffffffff;
  private length = 0;

  /** Magic, deflate, no flags, no time, unknown OS. */
  header(): Uint8Array {
    return Uint8Array.of(0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff);
  }

  /** Counts `bytes` (uncompressed) into the trailer's CRC-32 and length. */
  add(bytes: Uint8Array): void {
    let c = this.crc;
    for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
    this.crc = c;
    this.length = (this.length + bytes.length) % 2 ** 32;
  }

  /** A final empty fixed-Huffman block, then CRC-32 and length (mod 2^32), little-endian. */
  trailer(): Uint8Array {
    const out = new Uint8Array(10);
    out[0] = 0x03;
    out[1] = 0x00;
    const view = new DataView(out.buffer);
    view.setUint32(2, (this.crc ^ 0xffffffff) >>> 0, true);
    view.setUint32(6, this.length, true);
    return out;
  }
}

const CRC_TABLE = (() => {
  const table = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c;
  }
  return table;
})();
