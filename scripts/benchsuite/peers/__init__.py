"""The peers tables' machinery: vescale-train and its peers run round-robin, their candidates'
thread settings, and the table of their medians and ratios."""
