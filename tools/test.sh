#!/usr/bin/env bash
# Set up (once) and run the yolo3 test suite.
#   bash tools/test.sh              default suite (slow tests excluded)
#   YOLO3_SLOW=1 bash tools/test.sh also the slow tests
#   bash tools/test.sh tests/test_model.py -k params   extra arguments go to pytest
# The tests run in YOLO3_TEST_WORKERS processes (pytest-xdist, default 2; each test file whole in
# one of them, so module fixtures are made once); YOLO3_TEST_WORKERS=0 runs them in this one.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/_setup_env.sh
yolo3_setup_env test

marker="not slow"
if [[ "${YOLO3_SLOW:-0}" == "1" ]]; then marker=""; fi

workers="${YOLO3_TEST_WORKERS:-2}"
parallel=()
if [[ "$workers" != "0" ]]; then parallel=(-n "$workers" --dist loadfile); fi

set +e
"$VENV/bin/python" -m pytest -m "$marker" ${parallel[@]+"${parallel[@]}"} "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "tools/test.sh: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
