#!/bin/sh
# Controller balancing (LBDC) at scale: fat-tree k=48 and a 100,000-switch Waxman graph with
# 1,000 controllers and f <= 8; then re-balancing on the Waxman graph after 5 load changes
# (drift 0.3), uniform and Zipf loads, with the default target 1.02 x the best lower bound.
# Usage: bench/lbdc.sh [BUILD_DIR]; figures in docs/benchmarks.md.
set -eu
build=${1:-build}
lbdc="$build/bin/titan-lbdc"
policies=regions,greedy,distributed,lp-round,lst
grep -m1 'model name' /proc/cpuinfo
grep -m1 '^flags' /proc/cpuinfo
nproc
"$lbdc" --topology=fat-tree:48 --controllers=48 --placement=k-center --hops=2 \
  --max-potential=8 --loads=uniform:1,100 --policies=$policies --csv=lbdc-fat-tree-48.csv
waxman="--topology=waxman:100000,0.4,0.6,8 --controllers=1000 --placement=k-center --hops=10
  --max-potential=8"
# shellcheck disable=SC2086
"$lbdc" $waxman --loads=uniform:1,100 --policies=$policies --csv=lbdc-waxman-100k.csv \
  --svg=lbdc-waxman-100k.svg
for loads in uniform:1,100 zipf; do
  # shellcheck disable=SC2086
  "$lbdc" $waxman --loads=$loads --changes=5 --policies=greedy,distributed,lp-round,lst \
    --csv="lbdc-waxman-100k-changes-${loads%%:*}.csv"
done
