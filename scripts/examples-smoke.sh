#!/usr/bin/env bash
# Runs the commands README.md shows, with small workloads, and checks what
# they print. Called by .ci/run after the tests; run it by hand with
#   bash scripts/examples-smoke.sh
# It needs no network beyond 127.0.0.1 and no Kafka: every program uses
# longhaul's embedded broker.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
broker_pid=""
cleanup() {
  if [ -n "$broker_pid" ]; then kill "$broker_pid" 2>/dev/null || true; wait "$broker_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "examples-smoke: FAIL: $*" >&2
  for f in "$tmp"/*.out "$tmp"/*.err; do
    [ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
  done
  exit 1
}

# row LABEL FILE prints the cells of the highbdp table row LABEL.
row() { awk -v l="$1" 'index($0, l "  ") == 1 { print substr($0, length(l) + 1) }' "$2" | tr -s ' ' | sed 's/^ //'; }

echo "== go run ./examples/highbdp (small workload)"
go run ./examples/highbdp --records 4000 >"$tmp/highbdp.out" 2>"$tmp/highbdp.err" || fail "highbdp exited $?"
cat "$tmp/highbdp.out"
[ "$(row 'learned window' "$tmp/highbdp.out")" = "5 50" ] || fail "highbdp: learned window row is not '5 50'"
[ "$(row 'max batches in flight (broker)' "$tmp/highbdp.out")" = "5 50" ] || fail "highbdp: broker max in flight row is not '5 50'"
[ "$(row 'log: each record once, in order' "$tmp/highbdp.out")" = "ok ok" ] || fail "highbdp: log check"
read -r w5 w50 < <(row 'MB/s' "$tmp/highbdp.out")
awk -v a="$w5" -v b="$w50" 'BEGIN { exit !(b > 1.5 * a) }' || fail "highbdp: window 50 ($w50 MB/s) is not 1.5x window 5 ($w5 MB/s)"
grep -q 'records acked' "$tmp/highbdp.err" || fail "highbdp: no progress line"

summary_re='^[0-9]+ records sent, [0-9.]+ records/sec \([0-9.]+ MB/sec\), [0-9.]+ ms avg latency, [0-9.]+ ms max latency, [0-9]+ ms 50th, [0-9]+ ms 95th, [0-9]+ ms 99th, [0-9]+ ms 99\.9th\.$'

echo "== go run ./examples/perf --num-records 20000 --record-size 100 --throughput -1"
go run ./examples/perf --num-records 20000 --record-size 100 --throughput -1 >"$tmp/perf.out" 2>"$tmp/perf.err" || fail "perf exited $?"
last=$(tail -n 1 "$tmp/perf.out")
echo "$last"
echo "$last" | grep -Eq "$summary_re" || fail "perf: last line is not a summary line"
case "$last" in "20000 records sent, "*) ;; *) fail "perf: not 20000 records" ;; esac

echo "== go run ./examples/quickstart"
go run ./examples/quickstart >"$tmp/quickstart.out" 2>"$tmp/quickstart.err" || fail "quickstart exited $?"
cat "$tmp/quickstart.out"
grep -q '^produced 1000 records to quickstart idempotently' "$tmp/quickstart.out" || fail "quickstart: no summary"
grep -Eq '^partition 0: [0-9]+ records, offsets 0\.\.[0-9]+, learned window 20,' "$tmp/quickstart.out" || fail "quickstart: no offsets"

echo "== go run ./examples/eos (exactly-once consume-transform-produce, embedded broker)"
go run ./examples/eos -records 2000 >"$tmp/eos.out" 2>"$tmp/eos.err" || fail "eos exited $?"
tail -n 2 "$tmp/eos.out"
grep -q '^committed transaction 1: ' "$tmp/eos.out" || fail "eos: no committed transaction"
grep -q '^output checked read_committed: the transform of each of the 2000 input records, once, in order$' "$tmp/eos.out" || fail "eos: output check"

echo "== go run ./examples/broker --nodes 3 --rtt 50ms --topics events:6:20,logs:3, and clients pointed at it"
go build -o "$tmp/broker" ./examples/broker
addr_flag=()
# The README's command listens on 127.0.0.1:9092; if that is taken here,
# the same command on a free port still shows that it works.
if (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null; then addr_flag=(--addr 127.0.0.1:0); fi
"$tmp/broker" --nodes 3 --rtt 50ms --topics events:6:20,logs:3 "${addr_flag[@]}" >"$tmp/broker.out" 2>"$tmp/broker.err" &
broker_pid=$!
for _ in $(seq 100); do
  grep -q '^bootstrap: ' "$tmp/broker.out" && break
  kill -0 "$broker_pid" 2>/dev/null || fail "broker exited"
  sleep 0.1
done
bootstrap=$(sed -n 's/^bootstrap: //p' "$tmp/broker.out")
[ -n "$bootstrap" ] || fail "broker printed no bootstrap address"
echo "broker at $bootstrap"
go run ./examples/quickstart --bootstrap-server "$bootstrap" --topic events >"$tmp/qs-broker.out" 2>"$tmp/qs-broker.err" || fail "quickstart against the broker exited $?"
grep -q 'topic events exists, 6 partitions' "$tmp/qs-broker.out" || fail "quickstart did not find the broker's topic"
grep -Eq '^partition [0-5]: [0-9]+ records, offsets 0\.\.[0-9]+, learned window 20,' "$tmp/qs-broker.out" || fail "quickstart against the broker: no window 20"
go run ./examples/perf --bootstrap-server "$bootstrap" --topic events --num-records 20000 --record-size 100 --throughput -1 --producer-props max.in.flight.requests.per.connection=100 >"$tmp/perf-broker.out" 2>"$tmp/perf-broker.err" || fail "perf against the broker exited $?"
tail -n 1 "$tmp/perf-broker.out" | grep -Eq "$summary_re" || fail "perf against the broker: no summary line"
tail -n 1 "$tmp/perf-broker.out"
kill -INT "$broker_pid"
wait "$broker_pid" || fail "broker did not stop cleanly on SIGINT"
broker_pid=""
grep -q '^stopping' "$tmp/broker.out" || fail "broker did not report stopping"

echo "examples-smoke: ok"
