import { MemscopeError } from '../core/errors.js';
import type { ReportCaps, ReportData } from './report-data.js';

/** PyTorch snapshot / chrome-trace inputs for `memscope report`. */
export async function torchToReport(file: string, head: Buffer, caps: ReportCaps): Promise<ReportData> {
  void caps;
  const kind = head[0] === 0x80 ? 'a pickle (PyTorch snapshot)' : head[0] === 0x1f && head[1] === 0x8b ? 'gzip (chrome trace)' : 'JSON';
  throw new MemscopeError('unsupported-input', `report: ${file} looks like ${kind}, which this memscope cannot turn into a report yet`);
}
