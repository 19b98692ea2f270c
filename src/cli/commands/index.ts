import type { Command } from 'commander';
import { register as run } from './run.js';
import { register as leaks } from './leaks.js';
import { register as report } from './report.js';
import { register as demo } from './demo.js';

/** Each CLI verb lives in its own module and registers itself here (one line each). */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [
  demo,
  run,
  leaks,
  report,
];
