#!/usr/bin/env bash
# Set up (once) and run the yolo3 test suite.
#   bash tools/test.sh              default suite (slow tests excluded)
#   YOLO3_SLOW=1 bash tools/test.sh the default suite, then the slow tests (as CI)
#   YOLO3_SLOW=all bash tools/test.sh  the same, the extended tests too (the longest slow ones,
#                                      beyond CI's time: run them before a submission)
#   bash tools/test.sh tests/test_model.py -k params   extra arguments go to pytest
# Each run is in YOLO3_TEST_WORKERS processes (pytest-xdist, default 2; each test file whole in
# one of them, so module fixtures are made once); 0 runs the tests in this one. With
# YOLO3_SLOW=1 the default suite and the slow set are two pytest runs, each with fresh workers:
# one run of both in two long-lived workers lost a worker at 93% on a 24 GB machine (each worker
# holds TensorFlow's graphs of a thousand tests; docs/ci.md). Both runs happen even if the first
# fails, so one CI run reports every failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/_setup_env.sh
yolo3_setup_env test
# the suite's temporary folders (models, checkpoints, data sets) reach about 10 GB at their peak
yolo3_warn_low_disk "${TMPDIR:-/tmp}/pytest" 10 "the test suite's temporary files"

workers="${YOLO3_TEST_WORKERS:-2}"
parallel=()
if [[ "$workers" != "0" ]]; then parallel=(-n "$workers" --dist loadfile); fi

run_pytest() {  # run_pytest MARKER [pytest arguments]: pytest's code (no tests collected: 1)
  local marker="$1"; shift
  local rc=0
  "$VENV/bin/python" -m pytest -m "$marker" ${parallel[@]+"${parallel[@]}"} "$@" || rc=$?
  if [[ $rc -eq 5 ]]; then
    echo "tools/test.sh: pytest collected no tests (-m \"$marker\"): that is a failure" >&2
    rc=1
  fi
  return $rc
}

slow="${YOLO3_SLOW:-0}"
if [[ "$slow" != "1" && "$slow" != "all" ]]; then
  rc=0; run_pytest "not slow" "$@" || rc=$?
  exit $rc
fi
if [[ $# -gt 0 ]]; then  # chosen tests: one run of them, slow or not
  rc=0; run_pytest "" "$@" || rc=$?
  exit $rc
fi

start=$SECONDS
rc_default=0; run_pytest "not slow" || rc_default=$?
echo "tools/test.sh: the default suite took $((SECONDS - start)) s (exit $rc_default)" >&2
start=$SECONDS
slow_marker="slow and not extended"
if [[ "$slow" == "all" ]]; then slow_marker="slow"; fi
rc_slow=0; run_pytest "$slow_marker" --durations=60 || rc_slow=$?
echo "tools/test.sh: the slow set took $((SECONDS - start)) s (exit $rc_slow)" >&2
if [[ $rc_default -ne 0 ]]; then exit $rc_default; fi
exit $rc_slow
