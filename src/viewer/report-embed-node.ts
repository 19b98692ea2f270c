/** The report page's embedding codec in Node: zlib's raw deflate and Buffer's base64 (src/viewer/report-embed.ts). */
import { constants, deflateRawSync } from 'node:zlib';
import type { EmbedCodec } from './report-embed.js';

export const nodeEmbedCodec: EmbedCodec = {
  deflateRaw: (bytes) => deflateRawSync(bytes, { level: constants.Z_DEFAULT_COMPRESSION }),
  base64: (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'),
};
