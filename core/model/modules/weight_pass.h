// The zero-bubble split of a backward (titan/pipeline.h's BackwardInput and BackwardWeight):
// while BackwardInput runs, the modules compute only input gradients and leave each weight
// gradient here as work for BackwardWeight, with the memory it will read (the output gradient
// and the input) kept in the microbatch's activation set or copied aside.
#ifndef TITAN_CORE_MODEL_MODULES_WEIGHT_PASS_H_
#define TITAN_CORE_MODEL_MODULES_WEIGHT_PASS_H_

#include <cstdint>
#include <vector>

#include "core/tensor/arena.h"
#include "titan/compute.h"
#include "titan/module.h"

namespace titan {

// A weight gradient left for BackwardWeight: grad(weight) += dout^T . in (a projection), the
// norm weight's gradient summed already (`in` empty), or the embedding's scatter of `saved`.
struct DeferredGrad {
  enum Kind { kProjection, kNorm, kEmbedding } kind;
  int layer;  // whose module's hooks surround it; -1: the root's
  int weight;
  int64_t rows;
  TensorView saved, in;
};

class WeightPass {
 public:
  // `activations`: the microbatch's activation set (what lies there stays until its weight
  // pass); `kept`: its arena for the rest, at the entries `grad_entries` and `input_entries`
  // (per parameter, -1: none planned); `work`: the list this pass appends to.
  WeightPass(Compute& compute, const Arena& activations, Arena& kept,
             const std::vector<int>& grad_entries, const std::vector<int>& input_entries,
             const std::vector<Parameter>& parameters, std::vector<DeferredGrad>& work)
      : compute_(compute),
        activations_(activations),
        kept_(kept),
        grad_entries_(grad_entries),
        input_entries_(input_entries),
        parameters_(parameters),
        work_(work) {}

  // The block whose hooks surround the work added from now on; -1: the root module.
  void set_layer(int layer) { layer_ = layer; }
  // Where the weight pass reads `values` (a weight's output gradient, or with `input` its
  // input): `values` itself when it lies in the activation set, else its copy in the kept arena
  // (zeros there when `values` has no data).
  absl::StatusOr<TensorView> Keep(const TensorView& values, int weight, bool input);
  void Add(DeferredGrad::Kind kind, int weight, int64_t rows, TensorView saved, TensorView in) {
    work_.push_back({kind, layer_, weight, rows, std::move(saved), std::move(in)});
  }

 private:
  Compute& compute_;
  const Arena& activations_;
  Arena& kept_;
  const std::vector<int>& grad_entries_;
  const std::vector<int>& input_entries_;
  const std::vector<Parameter>& parameters_;
  std::vector<DeferredGrad>& work_;
  int layer_ = -1;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_WEIGHT_PASS_H_
