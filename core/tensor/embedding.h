// Token embedding lookup. Token ids are checked by the caller (the model), once per batch.
#ifndef TITAN_CORE_TENSOR_EMBEDDING_H_
#define TITAN_CORE_TENSOR_EMBEDDING_H_

#include <cstdint>

namespace titan {

// out[i, :] = table[tokens[i], :] for i < n; rows have c channels.
template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const T* table, int64_t n, int64_t c);

// dtable[tokens[i], :] += dout[i, :]. Threads own column chunks and walk tokens in order, so
// repeated tokens add up in the same order whatever the thread count.
template <typename T>
void EmbeddingBackward(T* dtable, const T* dout, const int32_t* tokens, int64_t n, int64_t c);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_EMBEDDING_H_
