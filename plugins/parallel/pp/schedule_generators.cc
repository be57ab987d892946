// The named schedules' compute actions, after torch.distributed.pipelining's generators. Only the
// order matters here: PyTorch's idle slots (None) are left out, Check's simulation finds them.
#include "plugins/parallel/pp/schedule_generators.h"

#include <algorithm>
#include <deque>

namespace titan::pp {
namespace {

constexpr ActionType kF = ActionType::kForward;
constexpr ActionType kB = ActionType::kBackward;
constexpr ActionType kI = ActionType::kBackwardInput;
constexpr ActionType kW = ActionType::kBackwardWeight;

// Appends actions with each stage's next microbatch per direction: F counts forwards, B and I
// count input gradients, W and B count weight gradients. Microbatches at or past `limit` are
// counted but left out (ZBV plans for at least 2 * ranks - 1 microbatches, then drops the rest).
class Emitter {
 public:
  Emitter(const GeneratorInput& in, std::vector<Action>& out)
      : forward_(in.ranks * in.stages_per_rank),
        input_(forward_.size()),
        weight_(forward_.size()),
        limit_(in.microbatches),
        out_(out) {}

  Action Emit(ActionType type, int stage) {
    std::vector<int>& counter = type == kF ? forward_ : type == kW ? weight_ : input_;
    const Action action{type, stage, counter[stage]++};
    if (type == kB) ++weight_[stage];
    if (action.microbatch < limit_) out_.push_back(action);
    return action;
  }

 private:
  std::vector<int> forward_, input_, weight_;
  int limit_;
  std::vector<Action>& out_;
};

}  // namespace

void GPipeRank(const GeneratorInput& in, int rank, std::vector<Action>& out) {
  for (int m = 0; m < in.microbatches; ++m) out.push_back({kF, rank, m});
  for (int m = 0; m < in.microbatches; ++m) out.push_back({kB, rank, m});
}

void OneFOneBRank(const GeneratorInput& in, int rank, std::vector<Action>& out) {
  Emitter emit(in, out);
  // Warm-up: enough forwards that the first backward arrives as the steady state begins.
  const int warmup = std::min(in.microbatches, in.ranks - 1 - rank);
  for (int i = 0; i < warmup; ++i) emit.Emit(kF, rank);
  for (int i = warmup; i < in.microbatches; ++i) {
    emit.Emit(kF, rank);
    emit.Emit(kB, rank);
  }
  for (int i = 0; i < warmup; ++i) emit.Emit(kB, rank);
}

void LoopedBfsRank(const GeneratorInput& in, int rank, std::vector<Action>& out) {
  for (int local = 0; local < in.stages_per_rank; ++local) {
    for (int m = 0; m < in.microbatches; ++m) out.push_back({kF, local * in.ranks + rank, m});
  }
  for (int local = in.stages_per_rank - 1; local >= 0; --local) {
    for (int m = in.microbatches - 1; m >= 0; --m) {
      out.push_back({kB, local * in.ranks + rank, m});
    }
  }
}

void InterleavedRank(const GeneratorInput& in, int rank, bool zero_bubble,
                     std::vector<Action>& out) {
  const int v = in.stages_per_rank;
  const int p = in.ranks;
  const int per_round = in.microbatches / std::max(1, in.microbatches / p);
  // The last rank warms up (v - 1) rounds; each hop back adds 2 forwards (1 with zero bubble,
  // whose I is half a backward).
  const int warmup =
      std::min((v - 1) * per_round + (zero_bubble ? 1 : 2) * (p - 1 - rank), in.microbatches * v);
  const int ops = in.microbatches * v;
  auto forward_stage = [&](int op) { return (op / per_round) % v * p + rank; };
  auto backward_stage = [&](int op) { return (v - 1 - (op - warmup) / per_round % v) * p + rank; };
  const ActionType backward = zero_bubble ? kI : kB;
  Emitter emit(in, out);
  std::deque<int> weights_due;  // stages whose I ran and whose W has not
  for (int op = 0; op < warmup + ops; ++op) {
    if (op < ops) emit.Emit(kF, forward_stage(op));
    if (op < warmup) continue;
    emit.Emit(backward, backward_stage(op));
    if (!zero_bubble) continue;
    weights_due.push_back(backward_stage(op));
    // ZB1P: rank r runs r plain 1F1B steps, then a W after each I, the oldest I first.
    if (op - warmup >= rank) {
      emit.Emit(kW, weights_due.front());
      weights_due.pop_front();
    }
  }
  for (int stage : weights_due) emit.Emit(kW, stage);
}

void ZbvRank(const GeneratorInput& in, int rank, std::vector<Action>& out) {
  const int p = in.ranks;
  const int planned = std::max(2 * p - 1, in.microbatches);
  const int down = rank;            // the stage on the way down the V
  const int up = 2 * p - 1 - rank;  // the stage on the way back up
  int f_down = 0, f_up = 0;
  Emitter emit(in, out);
  auto forward = [&](int stage) {
    emit.Emit(kF, stage);
    ++(stage == down ? f_down : f_up);
  };
  auto input_and_weight = [&](int stage) {
    emit.Emit(kI, stage);
    emit.Emit(kW, stage);
  };
  for (int i = 0; i < 2 * (p - rank) - 1; ++i) forward(down);
  for (int i = 0; i < rank; ++i) {
    forward(up);
    forward(down);
  }
  for (int i = 0; i < p - rank; ++i) {
    forward(up);
    input_and_weight(up);
  }
  while (f_up < f_down || f_down < planned) {
    if (f_down < planned) forward(down);
    input_and_weight(down);
    forward(up);
    input_and_weight(up);
  }
  // Cool-down: the remaining input gradients first, the weight gradients fill in behind them.
  int w_down = 0, w_up = 0;
  for (int i = 0; i < rank; ++i) {
    emit.Emit(kI, down);
    emit.Emit(kI, up);
    ++w_down;
    ++w_up;
  }
  for (int i = 0; i < p - rank; ++i) {
    emit.Emit(kI, down);
    ++w_down;
    emit.Emit(kW, down);
    --w_down;
  }
  for (; w_up > 0; --w_up) emit.Emit(kW, up);
  for (; w_down > 0; --w_down) emit.Emit(kW, down);
}

// DeepSeek's overlapped forward-backward pairs (F of one stage with B of the other) have no
// action of their own here: each pair is written as its F, then its B, in the same order.
void DualPipeVRank(const GeneratorInput& in, int rank, std::vector<Action>& out) {
  const int p = in.ranks;
  const int s0 = rank;
  const int s1 = 2 * p - 1 - rank;
  Emitter emit(in, out);
  std::deque<Action> weights_due;  // W of every I, oldest first
  auto input = [&](int stage) {
    const Action i = emit.Emit(kI, stage);
    weights_due.push_back({kW, stage, i.microbatch});
  };
  auto weight_if_due = [&] {
    if (weights_due.empty()) return;
    out.push_back(weights_due.front());
    weights_due.pop_front();
  };
  auto forward_then_backward = [&](int forward_stage, int backward_stage) {
    emit.Emit(kF, forward_stage);
    emit.Emit(kB, backward_stage);
  };
  for (int i = 0; i < 2 * (p - rank - 1); ++i) emit.Emit(kF, s0);
  for (int i = 0; i < rank + 1; ++i) {
    emit.Emit(kF, s0);
    emit.Emit(kF, s1);
  }
  for (int i = 0; i < p - rank - 1; ++i) {
    input(s1);
    weight_if_due();
    emit.Emit(kF, s1);
  }
  for (int i = 0; i < in.microbatches - 2 * p + rank + 1; ++i) {
    forward_then_backward(s0, s1);
    forward_then_backward(s1, s0);
  }
  for (int i = 0; i < p - rank - 1; ++i) {
    emit.Emit(kB, s1);
    forward_then_backward(s1, s0);
  }
  // The second half of the last backwards splits into I and W, the W filling the drain.
  const int last = rank + 1;
  bool split = false;
  auto backward = [&](int stage) {
    if (split) {
      input(stage);
    } else {
      emit.Emit(kB, stage);
    }
  };
  for (int i = 0; i < last; ++i) {
    if (i == last / 2 && rank % 2 == 1) split = true;
    backward(s1);
    if (i == last / 2 && rank % 2 == 0) split = true;
    backward(s0);
  }
  for (int i = 0; i < p - rank - 1; ++i) {
    weight_if_due();
    backward(s0);
  }
  for (int i = 0; i < rank + 1; ++i) weight_if_due();
}

}  // namespace titan::pp
