// Rotary position embedding on interleaved pairs (x[2i], x[2i+1]), Meta's and TorchTitan's
// layout, with Llama 3's frequency scaling.
#ifndef TITAN_CORE_TENSOR_ROPE_H_
#define TITAN_CORE_TENSOR_ROPE_H_

#include <cstdint>

namespace titan {

struct RopeConfig {
  double theta = 500000.0;
  bool scaled = true;  // Llama 3 scaling of the low frequencies
  double scale_factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_context = 8192.0;
};

// cos/sin of the rotation angles, each [seq_len, head_dim / 2]. Frequencies and angles are
// rounded to f32 as PyTorch computes them, then widened for T = double.
// The table covers the positions position_offset .. position_offset + seq_len - 1.
template <typename T>
void RopeTable(T* cos, T* sin, int64_t seq_len, int64_t head_dim, const RopeConfig& config,
               int64_t position_offset = 0);

// In place on x [b, t, heads, head_dim]: rotates each pair by the position's angle.
template <typename T>
void RopeForward(T* x, const T* cos, const T* sin, int64_t b, int64_t t, int64_t heads,
                 int64_t head_dim);

// In place on dx: the rotation is orthogonal, so the gradient rotates back by the same angle.
template <typename T>
void RopeBackward(T* dx, const T* cos, const T* sin, int64_t b, int64_t t, int64_t heads,
                  int64_t head_dim);

// One position's heads [heads, head_dim], each pair rotated by the angle whose cos and sin are
// cos[i], direction * sin[i]: the reference loops and the vector kernels' fallback run this.
template <typename T>
inline void RopeRotateHeads(T* x, const T* cos, const T* sin, int64_t heads, int64_t head_dim,
                            T direction) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    T* pair = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const T re = pair[2 * i], im = pair[2 * i + 1], si = direction * sin[i];
      pair[2 * i] = re * cos[i] - im * si;
      pair[2 * i + 1] = re * si + im * cos[i];
    }
  }
}

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ROPE_H_
