#!/usr/bin/env bash
# `make fuzz`: every test of tests/fuzz with the long hypothesis profile, for FUZZ_MINUTES in all.
# Each test gets an equal share of the time; when its share runs out it is stopped (SIGTERM:
# asyncio.run inside the offline CLI absorbs SIGINT), timeout's status 124, which counts as a
# pass: it found nothing in its time. Any other non-zero status is a failure, printed with
# hypothesis' falsifying example (also kept in .hypothesis/ and replayed first next time).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
MINUTES="${FUZZ_MINUTES:-30}"

mapfile -t tests < <("$PYTHON" -m pytest -q --collect-only tests/fuzz 2>/dev/null | grep '::')
if [ "${#tests[@]}" -eq 0 ]; then
    echo "fuzz: no tests collected under tests/fuzz" >&2
    exit 2
fi
share=$(( MINUTES * 60 / ${#tests[@]} ))
[ "$share" -ge 5 ] || share=5
echo "fuzz: ${#tests[@]} tests, ${share}s each (FUZZ_MINUTES=${MINUTES})"
failed=()
for test in "${tests[@]}"; do
    start=$(date +%s)
    KINITIRAS_FUZZ=long timeout --kill-after=30 "$share" \
        "$PYTHON" -m pytest -q -p no:cacheprovider "$test" >"/tmp/kinitiras-fuzz.$$.log" 2>&1
    status=$?
    took=$(( $(date +%s) - start ))
    case $status in
        0|124) echo "ok     ${took}s  $test" ;;
        *) echo "FAILED ${took}s  $test (status $status)"; tail -n 60 "/tmp/kinitiras-fuzz.$$.log"; failed+=("$test") ;;
    esac
done
rm -f "/tmp/kinitiras-fuzz.$$.log"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: ${#failed[@]} of ${#tests[@]} tests failed: ${failed[*]}"
    exit 1
fi
echo "fuzz: ${#tests[@]} tests, no failure in ${MINUTES} minutes"
