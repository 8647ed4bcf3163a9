#!/usr/bin/env bash
# Mutation testing: evidence that the tests of the producer's error matrix
# (producer/internal/judge), the produce response decoder
# (protocol/produceresp.go) and the in-flight limiter (inflight) fail when
# the code they test is wrong. gremlins (from the module proxy, pinned)
# changes one operator at a time in the code the tests cover (a condition
# negated or its boundary moved, && for ||, + for -, a loop's break for
# continue...) and runs the package's tests against each such mutant; a
# mutant the tests still pass on "lived". Efficacy is killed / (killed +
# lived); each target fails the run below its floor (set a few points
# under the score measured when it was set).
#
#   bash scripts/mutation.sh            # every target
#   bash scripts/mutation.sh judge      # one: judge, decoder or inflight
#
# Each mutant costs a build and a test run of its package, so a target runs
# only the tests of what it mutates (GOFLAGS=-run): the decoder's, not
# protocol's compression suites; vet, which go test runs first, is off. Timed-out mutants (a mutated loop that no
# longer ends) count as neither.
set -euo pipefail
cd "$(dirname "$0")/.."

GREMLINS=github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN="$bin" go install "$GREMLINS"
g="$bin/gremlins"

# Every mutator that applies to this code: the defaults, plus && <-> ||,
# break <-> continue.
common=(unleash --workers 2 --timeout-coefficient 20 --invert-logical --invert-loopctrl --output-statuses lt)

run() {
  local name=$1 floor=$2 run=$3
  shift 3
  case " ${targets[*]} " in *" $name "*) ;; *) return 0 ;; esac
  echo "-- mutation testing: $name (efficacy floor $floor %)"
  local start=$SECONDS gate=()
  if [ "$floor" != 0 ]; then
    gate=(--threshold-efficacy "$floor")
  fi
  GOFLAGS="-run=$run -vet=off" "$g" "${common[@]}" "${gate[@]}" "$@"
  echo "-- $name: $((SECONDS - start)) s"
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(judge decoder inflight)
fi

run judge 100 . --invert-assignments --remove-self-assignments ./producer/internal/judge
# Every protocol file but produceresp.go is left alone.
run decoder 85 'ProduceResult|ProduceResponse|ParseProduceResponse|ConnProduce' \
  -E '(^|/)([^p]|p[^r]|pr[^o]|pro[^d]|prod[^u]|produ[^c]|produc[^e]|produce[^r])[^/]*\.go$' -E '(^|/)produce\.go$' ./protocol
run inflight 80 . ./inflight
