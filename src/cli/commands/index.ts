import type { Command } from 'commander';
import { register as run } from './run.js';
import { register as leaks } from './leaks.js';
import { register as report } from './report.js';
import { register as demo } from './demo.js';
import { register as replay } from './replay.js';
import { register as ops } from './ops.js';
import { register as torchSummary } from './summary.js';
import { register as torchStats } from './stats.js';
import { register as torchTrace } from './trace.js';
import { register as torchSegments } from './segments.js';
import { register as torchMemory } from './memory.js';
import { register as torchCompare } from './compare.js';
import { register as torchPlot } from './plot.js';

/** Each CLI verb lives in its own module and registers itself here (one line each). */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [
  demo,
  ops,
  run,
  leaks,
  report,
  replay,
  torchSummary,
  torchStats,
  torchTrace,
  torchSegments,
  torchMemory,
  torchCompare,
  torchPlot,
];
