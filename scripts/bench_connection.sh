#!/usr/bin/env bash
# What one task costs over the connection, with and without pipelining: 110 trivial ansible.builtin.stat runs on
# every node of a running `make sim` (scripts/bench/trivial_tasks.yml), each way once. Prints the figures.
# Usage: scripts/bench_connection.sh [ROUNDS]   (make bench-connection; needs a running make sim)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-110}
run() {  # run PIPELINING: the wall seconds of one playbook run
  local t0 t1
  t0=$(date +%s.%N)
  ANSIBLE_PIPELINING=$1 .venv/bin/ansible-playbook -i inventories/sim scripts/bench/trivial_tasks.yml \
    -e bench_rounds="$rounds" >/dev/null
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}'
}
off=$(run False)
on=$(run True)
echo "bench-connection: $rounds trivial tasks per node on every node: pipelining off ${off} s, on ${on} s"
