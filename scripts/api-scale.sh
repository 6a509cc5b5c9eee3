#!/usr/bin/env bash
# The HTTP API at 16,384 NPUs (docs/BENCHMARKS.md, "Schedules as patterns"): a server on SQLite
# under /usr/bin/time -v, a synthesis of torus:128x128 all-reduce 1 GiB (auto), its summary, the
# schedule streamed and validated, one rank's MSCCL++ view (refused: past the executor's limits) and
# one rank's Chakra trace; then the server's peak RSS.
# Usage: scripts/api-scale.sh [path to ccsynth, default the release build]. Port 18080.
set -u
BIN=$(realpath "${1:-$(dirname "$0")/../target/release/ccsynth}")
D=$(mktemp -d); mkdir -p $D; cd $D
/usr/bin/time -v $BIN serve --addr 127.0.0.1:18080 --database-url sqlite:$D/ccsynth.db --max-npus 16384 --max-result-bytes 1000000000000 --workers 1 > server.out 2> server.err &
TPID=$!
sleep 2
t0=$(date +%s.%N)
J=$(curl -s -XPOST localhost:18080/v1/syntheses -H 'content-type: application/json' -d '{"spec": "torus:128x128", "collective": {"kind": "all_reduce", "size_bytes": 1073741824}, "wait_ms": 0}' | python3 -c "import json,sys;print(json.load(sys.stdin)['id'])")
while true; do
  R=$(curl -s "localhost:18080/v1/jobs/$J?wait_ms=10000")
  st=$(echo "$R" | python3 -c "import json,sys;print(json.load(sys.stdin)['status'])")
  [ "$st" = "succeeded" -o "$st" = "failed" ] && break
done
t1=$(date +%s.%N)
S=$(echo "$R" | python3 -c "import json,sys;print(json.load(sys.stdin).get('schedule_id'))")
echo "job $st in $(echo "$t1 - $t0" | bc) s, schedule $S"
/usr/bin/time -f "summary %e s" curl -s localhost:18080/v1/schedules/$S/summary -o summary.json -w "%{http_code} %{size_download} B\n"
python3 -c "import json;d=json.load(open('summary.json'));print(d['algorithm'],d['collective_time_ns'],d['lower_bound_ns'],d['collective_time_ns']/d['lower_bound_ns'])"
/usr/bin/time -f "schedule %e s" curl -s localhost:18080/v1/schedules/$S -o sched.json -w "%{http_code} %{size_download} B\n"
$BIN validate sched.json | head -3
rm -f sched.json
/usr/bin/time -f "rank export %e s" curl -s "localhost:18080/v1/schedules/$S/export?format=mscclpp-json&rank=0" -w "\n%{http_code}\n" | cut -c1-400
/usr/bin/time -f "chakra rank export %e s" curl -s "localhost:18080/v1/schedules/$S/export?format=chakra-et&rank=129" -o rank.et -w "%{http_code} %{size_download} B\n"
/usr/bin/time -f "chakra rank export again %e s" curl -s "localhost:18080/v1/schedules/$S/export?format=chakra-et&rank=129" -o rank2.et -w "%{http_code} %{size_download} B\n"
cmp rank.et rank2.et && echo "the same trace, served again"
rm -f rank.et rank2.et
du -sh $D
kill -TERM $(pgrep -P $TPID)
wait $TPID
grep -E "Maximum resident|Elapsed" server.err
rm -rf $D
