# Sourced by the CI scripts (issue [32]): a stage's start and duration, printed as it ends and
# kept for .ci/run's summary.
#   stage_begin NAME   prints "[stage] NAME: started at +S s" (S: seconds since .ci/run began)
#   stage_end          prints "[stage] NAME: D s" and appends "NAME<TAB>D" to $VESCALE_STAGE_LOG
# Outside .ci/run (no VESCALE_CI_EPOCH) the clock starts with the sourcing script.
export VESCALE_CI_EPOCH=${VESCALE_CI_EPOCH:-$(date +%s)}
_stage_name="" _stage_started=0

stage_begin() {
  _stage_name=$1 _stage_started=$(date +%s)
  echo "[stage] $_stage_name: started at +$((_stage_started - VESCALE_CI_EPOCH)) s"
}

stage_end() {
  local took=$(($(date +%s) - _stage_started))
  echo "[stage] $_stage_name: $took s"
  [ -n "${VESCALE_STAGE_LOG:-}" ] && printf '%s\t%s\n' "$_stage_name" "$took" >>"$VESCALE_STAGE_LOG"
  return 0
}
