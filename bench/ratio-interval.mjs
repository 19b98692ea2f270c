// How far a bench's headline ratio could move from run-to-run noise alone: a percentile bootstrap
// over rounds. Each resample draws as many rounds as were run, with replacement, keeping a round's
// two measurements together (they ran side by side), and recomputes the statistic — here a ratio
// of medians, the figure the benches print. The interval is what that ratio would read across
// repeated benches on this machine in this state; a target inside it is not settled by the run.
// Resampled with Math.random, so two printings of the same measurements differ a little: over
// 4,000 resamples the ends move by a few hundredths of the interval's width.

/**
 * The `level` percentile interval of median(numerator) / median(denominator) over rounds, where
 * round i measured numerator[i] and denominator[i]. `median` is the bench's own median function.
 */
export function ratioInterval(numerator, denominator, median, { resamples = 4000, level = 0.95 } = {}) {
  const n = numerator.length;
  if (n === 0 || denominator.length !== n) throw new Error('ratioInterval: one numerator and one denominator per round');
  const ratios = new Float64Array(resamples);
  const num = new Array(n);
  const den = new Array(n);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) {
      const k = Math.floor(Math.random() * n);
      num[i] = numerator[k];
      den[i] = denominator[k];
    }
    ratios[r] = median(num) / median(den);
  }
  ratios.sort();
  const tail = (1 - level) / 2;
  return { low: ratios[Math.floor(tail * (resamples - 1))], high: ratios[Math.ceil((1 - tail) * (resamples - 1))] };
}

/** "met", "NOT met", and whether the interval settles it, for a target the ratio must stay at or under (`atMost`) or reach. */
export function verdict(ratio, interval, target, atMost) {
  const met = atMost ? ratio <= target : ratio >= target;
  const settled = atMost ? interval.high <= target || interval.low > target : interval.low >= target || interval.high < target;
  return `${met ? 'met' : 'NOT met'}${settled ? '' : ` (the interval includes ${target}: this run cannot tell)`}`;
}
