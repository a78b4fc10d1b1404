"""gpu-check: vescale-train checked on a GPU machine in one call (scripts/gpu-check.sh runs it).

Modules by concept: options (the command line), clock (deadlines), runs (vescale-train and the
peers under time limits), logfiles (reading their logs), figures (numbers from metrics and
traces), table (rows, bars, the summary line), results (where the table goes), machine (the
header's facts), configs (the jobs this check writes), kernel_rows (NOTE [GPU-verified]),
context (one call's shared state), and stages/ (one module a stage); cli ties them together.
"""
