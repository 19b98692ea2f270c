#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { MemscopeError } from '../core/errors.js';
import type { RegisterCommand } from './commands/index.js';

/** Exit codes every verb shares: 0 ok, 1 bad input (the message names it), 2 usage. */
const EXIT_BAD_INPUT = 1;
const EXIT_USAGE = 2;

/**
 * The PyTorch-file verbs load alone: `memscope summary big.pickle` then compiles its own module
 * graph (~30 files) instead of every verb's (~70, the TFJS demo and report viewer included), which
 * took ~30 ms of a ~0.5 s run. Anything else (help, the other verbs) loads the full registry.
 */
const SINGLE_VERB_MODULES: Readonly<Record<string, () => Promise<{ register: RegisterCommand }>>> = {
  summary: () => import('./commands/summary.js'),
  stats: () => import('./commands/stats.js'),
  trace: () => import('./commands/trace.js'),
  segments: () => import('./commands/segments.js'),
  memory: () => import('./commands/memory.js'),
  compare: () => import('./commands/compare.js'),
  plot: () => import('./commands/plot.js'),
};

async function commandsFor(verb: string | undefined): Promise<readonly RegisterCommand[]> {
  const load = verb !== undefined && Object.hasOwn(SINGLE_VERB_MODULES, verb) ? SINGLE_VERB_MODULES[verb] : undefined;
  if (load) return [(await load()).register];
  return (await import('./commands/index.js')).commands;
}

const program = new Command();
program
  .name('memscope')
  .description('Where did my tensor memory go? Memory tracking and profiling for TensorFlow.js and PyTorch files.')
  .version('0.1.0')
  .showHelpAfterError()
  // Throw instead of exiting so usage errors get their own exit code. Set
  // before the verbs are added: subcommands inherit it when created.
  .exitOverride();

for (const register of await commandsFor(process.argv[2])) register(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = exitCodeFor(err);
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    // Help and --version arrive here too, with exit code 0; commander has
    // already printed its message for real usage errors.
    return err.exitCode === 0 ? 0 : EXIT_USAGE;
  }
  if (err instanceof MemscopeError) {
    process.stderr.write(`memscope: ${err.message}\n`);
    return EXIT_BAD_INPUT;
  }
  // A file that cannot be opened is bad input, not a crash: name it plainly.
  const sys = err as NodeJS.ErrnoException;
  if (sys && typeof sys.code === 'string' && typeof sys.syscall === 'string') {
    process.stderr.write(`memscope: cannot ${sys.syscall} ${sys.path ?? ''}: ${sys.code}\n`);
    return EXIT_BAD_INPUT;
  }
  throw err;
}
