import { Command, CommanderError } from 'commander';
import { isMemscopeError } from '../core/errors.js';
import type { RegisterCommand } from './commands/index.js';
import type { PytorchFileVerb } from './verbs.js';

/** Exit codes every verb shares: 0 ok, 1 bad input (the message names it), 2 usage. */
const EXIT_BAD_INPUT = 1;
const EXIT_USAGE = 2;

/** Loads every verb's registration: the TFJS verbs, the report viewer, `run`, and the rest. */
export type LoadAllCommands = () => Promise<{ commands: readonly RegisterCommand[] }>;

/**
 * The PyTorch-file verbs load alone: `memscope summary big.pickle` then sets up its own modules
 * (~30) instead of every verb's (~70, the TFJS demo and report viewer included), which took ~30 ms
 * of a ~0.5 s run. In the bin's bundle they are all one file, and a verb's modules are initialised
 * when it is loaded here. Anything else (help, the other verbs) loads the full registry.
 */
const SINGLE_VERB_MODULES: Readonly<Record<PytorchFileVerb, () => Promise<{ register: RegisterCommand }>>> = {
  summary: () => import('./commands/summary.js'),
  stats: () => import('./commands/stats.js'),
  trace: () => import('./commands/trace.js'),
  segments: () => import('./commands/segments.js'),
  memory: () => import('./commands/memory.js'),
  compare: () => import('./commands/compare.js'),
  plot: () => import('./commands/plot.js'),
};

async function commandsFor(verb: string | undefined, loadAll: LoadAllCommands): Promise<readonly RegisterCommand[]> {
  const load = verb !== undefined && Object.hasOwn(SINGLE_VERB_MODULES, verb) ? SINGLE_VERB_MODULES[verb as PytorchFileVerb] : undefined;
  if (load) return [(await load()).register];
  return (await loadAll()).commands;
}

/**
 * Runs the memscope CLI on `argv` (process.argv's shape) and sets `process.exitCode`. The full
 * registry comes from the caller: src/cli/main.ts imports it beside itself, and the bundled bin
 * from dist/ (the bundle cannot `import()` an ES module itself; see src/cli/bin.ts).
 */
export async function runCli(argv: readonly string[], loadAll: LoadAllCommands): Promise<void> {
  const program = new Command();
  program
    .name('memscope')
    .description('Where did my tensor memory go? Memory tracking and profiling for TensorFlow.js and PyTorch files.')
    .version('0.1.0')
    .showHelpAfterError()
    // Throw instead of exiting so usage errors get their own exit code. Set
    // before the verbs are added: subcommands inherit it when created.
    .exitOverride();

  for (const register of await commandsFor(argv[2], loadAll)) register(program);

  try {
    await program.parseAsync([...argv]);
  } catch (err) {
    process.exitCode = exitCodeFor(err);
  }
}

function exitCodeFor(err: unknown): number {
  if (err instanceof CommanderError) {
    // Help and --version arrive here too, with exit code 0; commander has
    // already printed its message for real usage errors.
    return err.exitCode === 0 ? 0 : EXIT_USAGE;
  }
  if (isMemscopeError(err)) {
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
