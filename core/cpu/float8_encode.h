// The CPU's Float8 encoder over whole rows: the branch-free twin of float8::EncodeFloat8 (which
// stays the scalar reference), written with selects instead of branches so that the compiler
// vectorizes it. The Float8 cast test compares the two on every f32 bit pattern.
#ifndef TITAN_CORE_CPU_FLOAT8_ENCODE_H_
#define TITAN_CORE_CPU_FLOAT8_ENCODE_H_

#include <cstdint>

#include "titan/float8_cast.h"

namespace titan::float8 {

// codes[i] = EncodeFloat8(values[i] * scale, format) for i in [0, count), bit for bit.
void EncodeFloat8Scaled(const float* values, float scale, int64_t count, const Float8Format& format,
                        uint8_t* codes);

}  // namespace titan::float8

#endif  // TITAN_CORE_CPU_FLOAT8_ENCODE_H_
