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

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ROPE_H_
