"""Statistics (pure): summaries, confidence intervals, outliers, comparisons."""
