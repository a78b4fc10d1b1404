"""Medians over runs and rounds."""
import statistics


def median_min_max(values):
    """(median, min, max) of values."""
    return statistics.median(values), min(values), max(values)


def round_ratio(values, ref_values):
    """values against ref_values: the median of the per-round ratios when both have a value for
    every round (rows of one round share the machine's state, rounds do not), else the ratio of
    the medians."""
    if len(values) == len(ref_values):
        return statistics.median(a / b for a, b in zip(values, ref_values))
    return statistics.median(values) / statistics.median(ref_values)


def median_after_first(lines, key):
    """The median of key over the steps after the first."""
    return statistics.median(key(line) for line in lines[1:])
