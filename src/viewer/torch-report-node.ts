import { openMemoryFile } from '../torch/open-node.js';
import type { ReportCaps, ReportData } from './report-data.js';
import { snapshotToReport, traceToReport } from './torch-report.js';

/** Reads a PyTorch snapshot or trace file (told apart by content) into report data. */
export async function torchToReport(file: string, caps: ReportCaps): Promise<ReportData> {
  const opened = await openMemoryFile(file);
  return opened.kind === 'snapshot' ? snapshotToReport(opened.snapshot, file, caps) : traceToReport(opened.trace, file, caps);
}
