import type { Command } from 'commander';
import { MemscopeError } from '../../core/errors.js';
import { DEFAULT_CAPS } from '../../viewer/report-data.js';
import { QueryError, query } from '../../viewer/query.js';
import { formatQueryResult, queryJson } from '../../viewer/query-text.js';
import { usageError } from '../options.js';
import { printJson, printText } from '../torch-common.js';
import { loadReportData } from './report.js';

export function register(program: Command): void {
  program
    .command('query')
    .description('filter and group a PyTorch snapshot\'s allocations (docs/QUERY.md), e.g. \'alive@peak group:user_frame\'')
    .argument('<file>', 'a PyTorch memory snapshot (.pickle)')
    .argument('<query>', 'the query, in quotes')
    .option('--json', 'print the totals, groups or allocations as JSON')
    .action(async (file: string, text: string, opts: { json?: boolean }) => {
      const data = await loadReportData(file, DEFAULT_CAPS);
      if (!data.memory) throw new MemscopeError('query-needs-snapshot', `${file}: memscope query reads PyTorch memory snapshots; this is a ${data.source.kind === 'trace' ? 'profiler trace' : 'memscope capture'}`);
      let result;
      try {
        result = query(data, text);
      } catch (e) {
        if (e instanceof QueryError) throw usageError(`query ${JSON.stringify(text)}: ${e.message}`);
        throw e;
      }
      if (opts.json) printJson(queryJson(data, text, result));
      else printText(formatQueryResult(data, text, result));
    });
}
