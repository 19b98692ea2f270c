import { Command, CommanderError } from 'commander';
import { MemscopeError } from '../core/errors.js';
import { unreadableFile } from '../core/input-file.js';
import type { VerbModule } from './verbs.js';
import { isUsageError } from './options.js';
import { endQuietlyOnClosedPipe } from './closed-pipe.js';

/**
 * Exit codes every verb shares: 0 ok, 1 an input that cannot be used (the message names the file
 * and the problem) or an internal error, 2 usage (an unknown verb or option, a missing argument,
 * a bad option value). `memscope leaks` adds 3, leaks found; `memscope run` exits with its script's code.
 */
const EXIT_ERROR = 1;
const EXIT_USAGE = 2;

/**
 * Runs the memscope CLI on `argv` (process.argv's shape) with the verbs of `verbs` and sets
 * `process.exitCode`. A verb named in argv[2] loads alone; anything else (help, --version, an
 * unknown verb) loads them all.
 */
export async function runCli(argv: readonly string[], verbs: Readonly<Record<string, VerbModule>>): Promise<void> {
  endQuietlyOnClosedPipe();
  const program = new Command();
  program
    .name('memscope')
    .description('Where did my tensor memory go? Memory tracking and profiling for TensorFlow.js and PyTorch files.')
    .version('0.1.0')
    // Commander's own error lines are printed by reportError, in memscope's one-line form.
    .configureOutput({ outputError: () => {} })
    // Throw instead of exiting so usage errors get their own exit code. Set
    // before the verbs are added: subcommands inherit both when created.
    .exitOverride();

  let verb: string | undefined;
  try {
    const asked = argv[2] !== undefined && Object.hasOwn(verbs, argv[2]) ? [verbs[argv[2]]!] : Object.values(verbs);
    for (const { register } of await Promise.all(asked.map((load) => load()))) register(program);
    verb = program.commands.some((c) => c.name() === argv[2]) ? argv[2] : undefined;
    await program.parseAsync([...argv]);
  } catch (err) {
    process.exitCode = reportError(err, verb);
  }
}

/** Where to read about the verb's options, after a usage error. */
function usageHint(verb: string | undefined): string {
  return ` (see memscope ${verb ? `${verb} ` : ''}--help)`;
}

/** Prints one line on stderr for `err` and returns the exit code: every failure of every verb ends here. */
export function reportError(err: unknown, verb: string | undefined): number {
  if (err instanceof CommanderError) {
    // Help and --version arrive here with exit code 0; help shown because no verb was given has
    // already been printed, and is a usage error.
    if (err.exitCode === 0) return 0;
    if (err.code === 'commander.help' || err.code === 'commander.helpDisplayed') return EXIT_USAGE;
    // Commander puts its suggestion ("(Did you mean --stacks?)") on a line of its own.
    process.stderr.write(`memscope: ${err.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ')}${usageHint(verb)}\n`);
    return EXIT_USAGE;
  }
  if (err instanceof MemscopeError) {
    if (isUsageError(err)) {
      process.stderr.write(`memscope: ${err.message}${usageHint(verb)}\n`);
      return EXIT_USAGE;
    }
    process.stderr.write(`memscope: ${err.message}\n`);
    return EXIT_ERROR;
  }
  // A system error that escaped a reader: the same wording as the readers' own (src/core/input-file.ts).
  const sys = err as NodeJS.ErrnoException | null;
  if (sys && typeof sys.code === 'string' && typeof sys.syscall === 'string') {
    process.stderr.write(`memscope: ${sys.path ? unreadableFile(sys.path, sys).message : `${sys.syscall}: ${sys.code}`}\n`);
    return EXIT_ERROR;
  }
  // A bug: one line, not a stack trace, unless asked for.
  const message = err instanceof Error ? err.message : String(err);
  if (process.env['MEMSCOPE_DEBUG'] === '1' && err instanceof Error) process.stderr.write(`${err.stack ?? message}\n`);
  process.stderr.write(`memscope: internal error: ${message.split('\n')[0]} (MEMSCOPE_DEBUG=1 prints the stack)\n`);
  return EXIT_ERROR;
}
