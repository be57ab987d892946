// Token embedding lookup. Token ids are checked by the caller (the model), once per batch.
#ifndef TITAN_CORE_TENSOR_EMBEDDING_H_
#define TITAN_CORE_TENSOR_EMBEDDING_H_

#include <cstdint>

namespace titan {

// The table may be a slice of the vocabulary (vocabulary-parallel embedding): it holds the rows
// of tokens [first_row, first_row + rows), and tokens outside that range look up zeros and get
// no gradient. The default is the whole vocabulary.
inline constexpr int64_t kAllRows = INT64_MAX;

// out[i, :] = table[tokens[i] - first_row, :] for i < n; rows have c channels.
template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const T* table, int64_t n, int64_t c,
                      int64_t first_row = 0, int64_t rows = kAllRows);

// dtable[tokens[i] - first_row, :] += dout[i, :]. Threads own column chunks and walk tokens in
// order, so repeated tokens add up in the same order whatever the thread count.
template <typename T>
void EmbeddingBackward(T* dtable, const T* dout, const int32_t* tokens, int64_t n, int64_t c,
                       int64_t first_row = 0, int64_t rows = kAllRows);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_EMBEDDING_H_
