/**
 * What an operating-system error means for a file memscope was asked to read or write, in the
 * words every verb uses. No memscope module is imported here: the bin's fast path for `memscope
 * run` uses it before any other memscope module loads.
 */

/** What an operating-system error code means for a file someone asked memscope to read. */
export function readProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EISDIR':
      return 'is a directory';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOTDIR':
      return 'no such file (a part of the path is not a directory)';
    case 'ELOOP':
      return 'too many symbolic links';
    case 'ENAMETOOLONG':
      return 'the name is too long';
    default:
      return `cannot read it (${code ?? (err instanceof Error ? err.message : String(err))})`;
  }
}

/** What an operating-system error code means for a file memscope was asked to write. */
export function writeProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return 'no such directory';
  if (code === 'EISDIR' || code === 'EACCES' || code === 'EPERM' || code === 'ENAMETOOLONG' || code === 'ELOOP') return readProblem(err);
  return code ?? (err instanceof Error ? err.message : String(err));
}
