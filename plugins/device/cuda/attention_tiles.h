// The tiling of titan's attention kernels (attention_kernels.cuh): which head dimension a kernel
// is built for, how many queries and keys a block holds in shared memory, how much shared memory
// that takes, the grids, and which tiles a block visits under the causal mask. Plain arithmetic
// that the host and the kernels share, so the CPU tests check it (attention_tiles_test.cc).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_TILES_H_
#define TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_TILES_H_

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TITAN_HOST_DEVICE __host__ __device__
#else
#define TITAN_HOST_DEVICE
#endif

namespace titan::cuda {

// q, out [batch, seq_len, heads, head_dim]; k, v [batch, kv_len, kv_heads, head_dim]; lse
// [batch, heads, seq_len]. Query i sees the keys j <= i + shift (shift = q_offset - kv_offset).
struct AttentionDims {
  int64_t batch, seq_len, kv_len, heads, kv_heads, head_dim, shift;
};

// Every block is 16 x 16 threads: thread (ty, tx) = (threadIdx.x / 16, threadIdx.x % 16) owns
// rows ty * (rows / 16) ... of a tile and the columns tx, tx + 16, ... of each.
constexpr int kAttentionThreadsPerSide = 16;
constexpr int kAttentionThreads = kAttentionThreadsPerSide * kAttentionThreadsPerSide;

// The smallest opt-in shared memory per block of the GPUs the kernels are built for (sm_86 and
// sm_89 have 99 KiB; sm_80 163 KiB; sm_90 227 KiB): every tiling fits it, so one build runs on all.
constexpr size_t kAttentionSharedLimit = size_t{99} * 1024;

// The head dimensions kernels are built for; a head_dim runs in the smallest one that holds it,
// its dimensions past head_dim read as zeros. 0: larger than any.
TITAN_HOST_DEVICE constexpr int HeadDimBucket(int64_t head_dim) {
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : head_dim <= 256 ? 256 : 0;
}

enum class AttentionPass { kForward, kKeyGrad, kQueryGrad };

// Queries and keys per block of a pass at a head-dim bucket. Shared memory grows with
// bucket * (queries + keys), so larger heads take smaller tiles to fit kAttentionSharedLimit.
struct AttentionTile {
  int queries, keys;
};
TITAN_HOST_DEVICE constexpr AttentionTile TileOf(AttentionPass pass, int bucket) {
  switch (pass) {
    case AttentionPass::kForward:
      return bucket == 64    ? AttentionTile{64, 64}
             : bucket == 128 ? AttentionTile{64, 32}
                             : AttentionTile{32, 16};
    case AttentionPass::kKeyGrad:
      return bucket == 64    ? AttentionTile{32, 64}
             : bucket == 128 ? AttentionTile{32, 32}
                             : AttentionTile{16, 16};
    case AttentionPass::kQueryGrad:
      return bucket == 64    ? AttentionTile{64, 64}
             : bucket == 128 ? AttentionTile{32, 32}
                             : AttentionTile{16, 16};
  }
  return {0, 0};
}

// Rows of shared-memory matrices are padded to an odd length (bucket + 1, tile + 1): a warp that
// walks a column then touches 32 different banks.
TITAN_HOST_DEVICE constexpr int PaddedRow(int length) { return length + 1; }

// Shared memory of one block, in floats and in bytes.
TITAN_HOST_DEVICE constexpr int64_t SharedFloatsOf(AttentionPass pass, int bucket) {
  const AttentionTile t = TileOf(pass, bucket);
  const int64_t q = t.queries, k = t.keys, row = PaddedRow(bucket);
  switch (pass) {
    case AttentionPass::kForward:  // q, k, v tiles and the probabilities [q, k]
      return (q + 2 * k) * row + q * PaddedRow(t.keys);
    case AttentionPass::kKeyGrad:  // k, v, q, dout tiles; p^T and ds^T [k, q]; lse and D per query
      return (2 * k + 2 * q) * row + 2 * k * PaddedRow(t.queries) + 2 * q;
    case AttentionPass::kQueryGrad:  // q, dout, k, v tiles and ds [q, k]
      return (2 * q + 2 * k) * row + q * PaddedRow(t.keys);
  }
  return 0;
}
TITAN_HOST_DEVICE constexpr size_t SharedBytesOf(AttentionPass pass, int bucket) {
  return static_cast<size_t>(SharedFloatsOf(pass, bucket)) * sizeof(float);
}

TITAN_HOST_DEVICE constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The keys query i sees: [0, VisibleKeys(dims, i)).
TITAN_HOST_DEVICE constexpr int64_t VisibleKeys(const AttentionDims& s, int64_t i) {
  const int64_t end = i + s.shift + 1;
  return end < 0 ? 0 : end > s.kv_len ? s.kv_len : end;
}

// The first query that sees key j (every later one does too); seq_len when none does.
TITAN_HOST_DEVICE constexpr int64_t FirstQuerySeeing(const AttentionDims& s, int64_t j) {
  const int64_t first = j - s.shift;
  return first < 0 ? 0 : first > s.seq_len ? s.seq_len : first;
}

// A block of the forward or the query gradient owns queries [i0, i0 + tile.queries) of one
// (batch, head) and visits the key tiles [0, KeyTilesSeenBy(...)): those holding a key its last
// query sees.
TITAN_HOST_DEVICE constexpr int64_t KeyTilesSeenBy(const AttentionDims& s, int64_t i0,
                                                   AttentionTile tile) {
  const int64_t last = (i0 + tile.queries < s.seq_len ? i0 + tile.queries : s.seq_len) - 1;
  return CeilDiv(VisibleKeys(s, last), tile.keys);
}

// A block of the key gradient owns keys [j0, j0 + tile.keys) of one (batch, kv head) and visits
// the query tiles [FirstQueryTileSeeing(...), CeilDiv(seq_len, tile.queries)).
TITAN_HOST_DEVICE constexpr int64_t FirstQueryTileSeeing(const AttentionDims& s, int64_t j0,
                                                         AttentionTile tile) {
  const int64_t first = FirstQuerySeeing(s, j0);
  return first == s.seq_len ? CeilDiv(s.seq_len, tile.queries) : first / tile.queries;
}

// Blocks of a pass: one per tile and (batch, head) (kv head for the key gradient), in one grid
// dimension. Block b takes tile TileOfBlock(b) of (batch, head) b % heads: the tiles of latest
// queries (most keys to visit) come first, so the longest blocks start first.
TITAN_HOST_DEVICE constexpr int64_t TilesOf(const AttentionDims& s, AttentionPass pass) {
  const AttentionTile t = TileOf(pass, HeadDimBucket(s.head_dim));
  return pass == AttentionPass::kKeyGrad ? CeilDiv(s.kv_len, t.keys)
                                         : CeilDiv(s.seq_len, t.queries);
}
TITAN_HOST_DEVICE constexpr int64_t HeadsOf(const AttentionDims& s, AttentionPass pass) {
  return s.batch * (pass == AttentionPass::kKeyGrad ? s.kv_heads : s.heads);
}
TITAN_HOST_DEVICE constexpr int64_t BlocksOf(const AttentionDims& s, AttentionPass pass) {
  return TilesOf(s, pass) * HeadsOf(s, pass);
}
TITAN_HOST_DEVICE constexpr int64_t TileOfBlock(const AttentionDims& s, AttentionPass pass,
                                                int64_t block) {
  const int64_t order = block / HeadsOf(s, pass);
  // The key gradient's earliest keys are seen by the most queries.
  return pass == AttentionPass::kKeyGrad ? order : TilesOf(s, pass) - 1 - order;
}

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_TILES_H_
