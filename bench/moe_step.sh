#!/usr/bin/env bash
# A mixture of experts' training step against a dense model of as many active parameters, on
# one rank: the qwen3 family at the debug model's width (dim 256, 6 blocks, 16 heads, vocabulary
# 2048, seq_len 256, batch 8), dense with a feed-forward of 512 features against 8 experts of 256
# features, 2 per token (the same feed-forward parameters per token, plus the router). Prints a
# markdown table (median step of 5 after a warm-up, tokens/s) for f32 and bf16 matmuls, and the
# CPU it ran on. Usage: bench/moe_step.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
bench=$build/bin/titan_train_bench
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
  "flags: $(grep -m1 -o -w -E 'avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo
echo "| model | matmuls | parameters per token in the feed-forward | step (s) | tokens/s |"
echo "|---|---|---:|---:|---:|"
common=(--dim 256 --n_layers 6 --n_heads 16 --n_kv_heads 16 --vocab_size 2048 --seq_len 256
        --batch 8 --steps 5)
for bf16 in 0 1; do
  precision=$([ "$bf16" = 1 ] && echo bf16 || echo f32)
  for model in dense moe; do
    if [ "$model" = dense ]; then
      args=(--qwen3 1 --hidden 512); label="dense, 512 features"
    else
      args=(--experts 8 --top_k 2 --expert_hidden 256); label="8 experts of 256, 2 per token"
    fi
    line=$("$bench" "${common[@]}" "${args[@]}" --bf16 "$bf16" 2>/dev/null)
    step=$(sed -n 's/.*step_s \([0-9.]*\).*/\1/p' <<<"$line")
    tps=$(sed -n 's/.*tokens_per_s \([0-9.]*\).*/\1/p' <<<"$line")
    echo "| $label | $precision | $((3 * 256 * 512)) | $step | $tps |"
  done
done
